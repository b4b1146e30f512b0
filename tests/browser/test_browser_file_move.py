"""The Settings page's "File store" tab (issue 39): where the files are, a move to the S3 bucket the
settings name (a moto server) interrupted at 10 of 40 files shown with its progress, an admin's
"Resume the move" finishing it, "Delete the old copies", and the form to move them again; screenshots
at 1280 and 390 px wide (test-artifacts/browser/file-store-*.png)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from knowledge.config import load_settings
from tests.helpers.browser import Server, app_page, serve, shot
from tests.helpers.s3 import S3_TEST_KEY, S3_TEST_SECRET, s3_client

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BUCKET = "browser-file-move"
N_FILES = 40


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A data folder with files in its filesystem store (before the app starts)."""
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.system import System

    base = tmp_path_factory.mktemp("browser-file-move")
    system = System(load_settings(data_dir=base / "data"), embedder_factory=lambda m: HashEmbedder(dimension=16))
    try:
        digests = {}
        for i in range(N_FILES):
            content = f"file {i} of the team\n".encode() * (i + 1)
            digests[system.files.save(f"f{i}.txt", "text/plain", content).id] = hashlib.sha256(content).hexdigest()
    finally:
        system.close()
    return base, digests


def _s3_settings(data: Path, endpoint: str):
    settings = load_settings(data_dir=data)
    return settings.model_copy(
        update={
            "file_store": settings.file_store.model_copy(
                update={
                    "s3_bucket": BUCKET,
                    "s3_endpoint_url": endpoint,
                    "s3_region": "us-east-1",
                    "s3_access_key_id": SecretStr(S3_TEST_KEY),
                    "s3_secret_access_key": SecretStr(S3_TEST_SECRET),
                }
            )
        }
    )


@pytest.fixture(scope="module")
def server(stored, s3_server: str) -> Iterator[Server]:
    """The app on the data folder, after a move to the bucket interrupted at 10 of 40 files (as a
    CLI move killed midway leaves it, quiet for longer than a running move ever is)."""
    from knowledge.catalog import Catalog
    from knowledge.service import filehome

    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    moving = _s3_settings(stored[0] / "data", s3_server)
    catalog = Catalog.from_settings(moving)

    class Interrupted(Exception):
        pass

    def stop_at_10(report, total):
        if report.copied >= 10:
            raise Interrupted

    with pytest.raises(Interrupted):
        filehome.move_files(moving, catalog, "s3", progress=stop_at_10, settle_seconds=0)
    with catalog.cursor() as cur:
        cur.execute(
            "UPDATE file_store_home SET progress = ?, updated = now() - INTERVAL 1 HOUR", ['{"copied": 10, "total": 40}']
        )
    catalog.close()
    env = {
        "KNOWLEDGE_FILE_STORE__S3_BUCKET": BUCKET,
        "KNOWLEDGE_FILE_STORE__S3_ENDPOINT_URL": s3_server,
        "KNOWLEDGE_FILE_STORE__S3_REGION": "us-east-1",
        "KNOWLEDGE_FILE_STORE__S3_ACCESS_KEY_ID": S3_TEST_KEY,
        "KNOWLEDGE_FILE_STORE__S3_SECRET_ACCESS_KEY": S3_TEST_SECRET,
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64",
    }
    with serve(stored[0], env_extra=env) as srv:
        yield srv


def _tab(pg) -> None:
    pg.get_by_role("tab", name="File store").click()
    pg.get_by_text("The files are in").wait_for()


def test_an_admin_resumes_the_move_to_the_bucket_from_the_settings_page(browser, server, artifacts, stored, s3_server):
    for width in (390, 1280):
        with app_page(browser, server, artifacts, "settings", width=width) as pg:
            _tab(pg)
            assert pg.get_by_text("the filesystem file store (folder 'files')").count() >= 1
            pg.get_by_text("10 of 40 files copied and checked").wait_for()  # the progress bar's text
            pg.get_by_role("button", name="Resume the move").wait_for()
            shot(pg, artifacts, f"file-store-interrupted-{width}.png")
    with app_page(browser, server, artifacts, "settings", width=1280) as pg:
        _tab(pg)
        pg.get_by_role("button", name="Resume the move").click()
        pg.get_by_text("Moved the files to the s3 file store").wait_for(timeout=180_000)
        assert pg.get_by_text("30 copied and checked").count() == 1  # the 10 verified before are skipped
        assert pg.get_by_text("The files are in the s3 file store").count() >= 1
        pg.get_by_role("button", name="Delete the old copies").wait_for()
        shot(pg, artifacts, "file-store-moved-1280.png")
    with app_page(browser, server, artifacts, "settings", width=390) as pg:
        _tab(pg)
        pg.get_by_role("button", name="Delete the old copies").wait_for()
        shot(pg, artifacts, "file-store-moved-390.png")
        pg.get_by_role("button", name="Delete the old copies").click()
        pg.get_by_text(f"Deleted {N_FILES} old copies.").wait_for()
        pg.get_by_role("button", name="Move the files").wait_for()  # back to the form: filesystem offered
        shot(pg, artifacts, "file-store-form-390.png")

    from knowledge.filestore import open_file_store

    settings = load_settings(data_dir=stored[0] / "data")
    fs = settings.file_store.model_copy(
        update={"backend": "s3", "s3_bucket": BUCKET, "s3_endpoint_url": s3_server, "s3_region": "us-east-1"}
    )
    import os

    os.environ.setdefault("AWS_ACCESS_KEY_ID", S3_TEST_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", S3_TEST_SECRET)
    bucket = open_file_store(settings.model_copy(update={"file_store": fs}))
    assert open_file_store(settings).list() == []  # the old copies are gone
    for fid, sha in stored[1].items():
        with bucket.content(fid) as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == sha
