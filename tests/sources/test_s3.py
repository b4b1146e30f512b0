"""The ``s3`` source (knowledge/sources/s3.py) against a real S3-protocol server: moto's server mode as a
child process on a loopback port, checking signatures and IAM policies (``s3_auth_server``), or one of
the test's own that it stops (``own_moto``)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import http.server
import io
import logging
import os
import signal
import threading
import traceback
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from knowledge.config import Settings
from knowledge.errors import InvalidArgument
from knowledge.sources.base import (
    Entry,
    EntryGone,
    SourceAuthFailed,
    SourceContext,
    SourceNotFound,
    SourceUnavailable,
)
from knowledge.sources.s3 import S3Source, content_key_of
from tests.helpers.moto_preloaded import preloaded_key
from tests.helpers.s3 import S3_TEST_KEY, S3_TEST_SECRET, AuthMoto, MotoServer, moto_server, s3_client

pytestmark = pytest.mark.s3


def _bucket() -> str:
    return "src-" + uuid.uuid4().hex[:16]


def _config(server: AuthMoto, bucket: str, **extra: Any) -> dict[str, Any]:
    return {
        "bucket": bucket,
        "endpoint_url": server.endpoint,
        "region": "us-east-1",
        "access_key_id": server.key_id,
        "secret_access_key": server.secret,
        **extra,
    }


def _source(settings: Settings, config: dict[str, Any], timeout: float = 10.0) -> S3Source:
    return S3Source(config, SourceContext(settings=settings, timeout=timeout))


def _read(source: S3Source, entry: Entry) -> bytes:
    out = io.BytesIO()
    source.fetch(entry, out)
    return out.getvalue()


def _md5(data: bytes) -> str:
    return "md5:" + hashlib.md5(data).hexdigest()


@pytest.fixture
def bucket(s3_auth_server: AuthMoto) -> tuple[Any, str]:
    """A fresh bucket on the checking server, and a client with the allowed key."""
    client, name = s3_auth_server.client(), _bucket()
    client.create_bucket(Bucket=name)
    return client, name


def test_lists_the_files_under_the_prefix_by_their_path_there(settings, s3_auth_server, bucket):
    client, name = bucket
    files = {
        "team/docs/a.txt": b"alpha",
        "team/docs/sub/b.md": b"# beta",
        "team/docs/sub/deeper/c.csv": b"x,y\n1,2\n",
        "team/docs/empty.txt": b"",
    }
    for key, body in files.items():
        client.put_object(Bucket=name, Key=key, Body=body)
    client.put_object(Bucket=name, Key="team/docs/sub/", Body=b"")  # a folder marker
    client.put_object(Bucket=name, Key="team/docs-old/d.txt", Body=b"not under the prefix")
    client.put_object(Bucket=name, Key="elsewhere.txt", Body=b"nor this")

    with _source(settings, _config(s3_auth_server, name, prefix="/team/docs/")) as source:
        assert source.location() == f"s3://{name}/team/docs/ at {s3_auth_server.endpoint}"
        entries = {e.path: e for e in source.entries()}
        assert set(entries) == {k.removeprefix("team/docs/") for k in files}
        for key, body in files.items():
            e = entries[key.removeprefix("team/docs/")]
            assert e.size == len(body)
            assert e.version == hashlib.md5(body).hexdigest()  # a single PUT's ETag
            assert e.content_key == _md5(body)
            assert e.url == f"s3://{name}/{key}"
            assert e.readers is None
            assert _read(source, e) == body
        assert source.check().startswith("reached")
        assert source.marker() is None

    with _source(settings, _config(s3_auth_server, name)) as whole:  # no prefix: the whole bucket
        assert {e.path for e in whole.entries()} == {*files, "team/docs-old/d.txt", "elsewhere.txt"}


def test_keys_that_are_no_clean_path_are_left_out_with_a_warning(settings, s3_auth_server, bucket, caplog):
    client, name = bucket
    for key in ("p/ok.txt", "p/a//b.txt", "p/./c.txt", "p/../d.txt"):
        client.put_object(Bucket=name, Key=key, Body=b"x")
    with (
        caplog.at_level(logging.WARNING, logger="knowledge.sources.s3"),
        _source(settings, _config(s3_auth_server, name, prefix="p")) as source,
    ):
        assert [e.path for e in source.entries()] == ["ok.txt"]
    assert "p/a//b.txt" in caplog.text and "left out" in caplog.text


def test_listing_pages_through_thousands_of_keys_a_thousand_at_a_time(settings, s3_auth_server, bucket):
    client, name = bucket
    keys = [f"many/{i % 7}/file-{i:05}.txt" for i in range(2_150)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=name, Key=k, Body=k.encode()), keys))
    with _source(settings, _config(s3_auth_server, name, prefix="many")) as source:
        calls: list[dict[str, Any]] = []
        source.client.meta.events.register("before-call.s3.ListObjectsV2", lambda params, **_: calls.append(params))
        paths = [e.path for e in source.entries()]
    assert sorted(paths) == sorted(k.removeprefix("many/") for k in keys)
    assert len(calls) == 3  # 1,000 + 1,000 + 150


def test_an_overwrite_changes_the_version_and_a_copy_keeps_the_content_key(settings, s3_auth_server, bucket):
    client, name = bucket
    client.put_object(Bucket=name, Key="d/report.txt", Body=b"first words")
    with _source(settings, _config(s3_auth_server, name, prefix="d")) as source:
        (before,) = source.entries()
        client.put_object(Bucket=name, Key="d/report.txt", Body=b"second words")
        (after,) = source.entries()
        assert after.version != before.version and after.content_key == _md5(b"second words")
        with pytest.raises(EntryGone, match="overwritten since it was listed"):
            _read(source, before)  # never the new bytes under the old version
        assert _read(source, after) == b"second words"

        client.copy_object(Bucket=name, Key="d/moved/report.txt", CopySource={"Bucket": name, "Key": "d/report.txt"})
        client.delete_object(Bucket=name, Key="d/report.txt")
        (moved,) = source.entries()
        assert moved.path == "moved/report.txt"
        assert moved.content_key == after.content_key and moved.version == after.version
        assert _read(source, moved) == b"second words"


def test_a_multipart_objects_etag_is_no_content_key(settings, s3_auth_server, bucket):
    client, name = bucket
    part1, part2 = os.urandom(5 * 1024 * 1024), b"tail of the file"
    upload = client.create_multipart_upload(Bucket=name, Key="big.bin")["UploadId"]
    parts = [
        {
            "PartNumber": n,
            "ETag": client.upload_part(Bucket=name, Key="big.bin", UploadId=upload, PartNumber=n, Body=b)["ETag"],
        }
        for n, b in ((1, part1), (2, part2))
    ]
    client.complete_multipart_upload(Bucket=name, Key="big.bin", UploadId=upload, MultipartUpload={"Parts": parts})
    with _source(settings, _config(s3_auth_server, name)) as source:
        (entry,) = source.entries()
        assert entry.version.endswith("-2") and entry.content_key is None
        assert entry.size == len(part1) + len(part2)
        assert _read(source, entry) == part1 + part2  # streamed in pieces


def test_content_key_rule():
    md5 = hashlib.md5(b"x").hexdigest()
    assert content_key_of(f'"{md5}"') == f"md5:{md5}"
    assert content_key_of(md5.upper()) == f"md5:{md5}"
    assert content_key_of(f'"{md5}-3"') is None  # multipart
    assert content_key_of("W/abc") is None and content_key_of("") is None


def test_a_file_deleted_between_listing_and_fetch_is_gone(settings, s3_auth_server, bucket):
    client, name = bucket
    client.put_object(Bucket=name, Key="x/keep.txt", Body=b"kept")
    client.put_object(Bucket=name, Key="x/gone.txt", Body=b"soon gone")
    with _source(settings, _config(s3_auth_server, name, prefix="x")) as source:
        entries = {e.path: e for e in source.entries()}
        client.delete_object(Bucket=name, Key="x/gone.txt")
        out = io.BytesIO()
        with pytest.raises(EntryGone, match=r"'gone\.txt' was deleted"):
            source.fetch(entries["gone.txt"], out)
        assert out.getvalue() == b""
        assert _read(source, entries["keep.txt"]) == b"kept"  # the others still read


def test_a_missing_bucket_is_not_found(settings, s3_auth_server):
    with (
        _source(settings, _config(s3_auth_server, "no-such-bucket-here")) as source,
        pytest.raises(SourceNotFound, match=r"'no-such-bucket-here'.* does not exist"),
    ):
        list(source.entries())


def _secret_nowhere(secret: str, exc: BaseException, source: S3Source) -> None:
    text = "".join(traceback.format_exception(exc))
    assert secret not in text and secret not in repr(source) and secret not in source.location()


@pytest.mark.parametrize(
    ("which", "code"),
    [
        ("wrong secret", "SignatureDoesNotMatch"),
        ("unknown key", "InvalidAccessKeyId"),
        ("key allowed nothing", "AccessDenied"),
    ],
)
def test_refused_credentials_are_auth_failed_in_words(settings, s3_auth_server, bucket, which, code, caplog, capfd):
    _, name = bucket
    wrong = "wrong-secret-" + uuid.uuid4().hex
    config = {
        "wrong secret": _config(s3_auth_server, name, secret_access_key=wrong),
        "unknown key": _config(s3_auth_server, name, access_key_id="AKIAUNKNOWNKEY000000", secret_access_key=wrong),
        "key allowed nothing": _config(
            s3_auth_server,
            name,
            access_key_id=s3_auth_server.denied_key_id,
            secret_access_key=s3_auth_server.denied_secret,
        ),
    }[which]
    secret = config["secret_access_key"]
    with caplog.at_level(logging.DEBUG), _source(settings, config) as source:
        with pytest.raises(SourceAuthFailed) as info:
            list(source.entries())
        with pytest.raises(SourceAuthFailed):
            source.fetch(Entry(path="any.txt", version="0" * 32), io.BytesIO())
    msg = str(info.value)
    assert f"refused the credentials ({code}" in msg and name in msg and "secret access key" in msg
    _secret_nowhere(secret, info.value, source)
    out, err = capfd.readouterr()
    assert secret not in caplog.text and secret not in out + err
    assert "Calculating signature" in caplog.text  # botocore did log its debug lines: the grep saw them


def test_temporary_credentials_work_and_the_session_token_is_never_logged(settings, s3_auth_server, bucket, caplog, capfd):
    client, name = bucket
    client.put_object(Bucket=name, Key="t/a.txt", Body=b"temporary")
    creds = s3_auth_server.client("sts").assume_role(RoleArn=s3_auth_server.role_arn, RoleSessionName="tests")["Credentials"]
    token, secret = creds["SessionToken"], creds["SecretAccessKey"]
    config = _config(
        s3_auth_server, name, prefix="t", access_key_id=creds["AccessKeyId"], secret_access_key=secret, session_token=token
    )
    with caplog.at_level(logging.DEBUG):
        with _source(settings, config) as source:
            (entry,) = source.entries()
            assert _read(source, entry) == b"temporary"
        with (
            _source(settings, {**config, "session_token": "not-" + token[:20]}) as bad,
            pytest.raises(SourceAuthFailed) as info,
        ):
            list(bad.entries())
    out, err = capfd.readouterr()
    for text in (caplog.text, out + err, str(info.value), repr(source)):
        assert token not in text and secret not in text
    assert "x-amz-security-token:***" in caplog.text.lower()  # botocore logged the header: redacted


def test_settings_that_cannot_work_are_refused_without_echoing_a_secret(settings, s3_auth_server):
    base = _config(s3_auth_server, "b-x")
    with pytest.raises(InvalidArgument, match="bucket"):
        _source(settings, {**base, "bucket": ""})
    with pytest.raises(InvalidArgument, match="secret access key"):
        _source(settings, {**base, "secret_access_key": None})
    with pytest.raises(InvalidArgument, match="addressing style"):
        _source(settings, {**base, "addressing_style": "sideways"})
    for endpoint in (
        f"http://k:{s3_auth_server.secret}@127.0.0.1:9",
        f"http://127.0.0.1:{s3_auth_server.secret}",
        "ftp://127.0.0.1",
        "127.0.0.1:9000",
    ):
        with pytest.raises(InvalidArgument, match="endpoint URL") as info:
            _source(settings, {**base, "endpoint_url": endpoint})
        assert s3_auth_server.secret not in str(info.value)


# -- the server down -----------------------------------------------------------------------------------------


def _own_config(server: MotoServer, bucket: str, **extra: Any) -> dict[str, Any]:
    return {
        "bucket": bucket,
        "endpoint_url": server.endpoint,
        "access_key_id": S3_TEST_KEY,
        "secret_access_key": S3_TEST_SECRET,
        **extra,
    }


def test_a_stopped_server_is_unavailable_and_a_restarted_one_is_read_again(settings, own_moto):
    name = _bucket()
    s3_client(own_moto.endpoint).create_bucket(Bucket=name)
    s3_client(own_moto.endpoint).put_object(Bucket=name, Key="a.txt", Body=b"before")
    with _source(settings, _own_config(own_moto, name)) as source:
        (entry,) = source.entries()
        own_moto.stop()
        with pytest.raises(SourceUnavailable) as info:
            list(source.entries())
        msg = str(info.value)
        assert "cannot be reached" in msg and own_moto.endpoint in msg and "next run" in msg
        _secret_nowhere(S3_TEST_SECRET, info.value, source)
        with pytest.raises(SourceUnavailable):
            _read(source, entry)

        own_moto.start()  # the same port; moto keeps nothing, as a server restored from nothing
        with pytest.raises(SourceNotFound):
            list(source.entries())
        s3_client(own_moto.endpoint).create_bucket(Bucket=name)
        s3_client(own_moto.endpoint).put_object(Bucket=name, Key="a.txt", Body=b"before")
        (again,) = source.entries()
        assert again.version == entry.version and _read(source, again) == b"before"


def test_a_server_that_does_not_answer_times_out_as_unavailable(settings, own_moto):
    name = _bucket()
    s3_client(own_moto.endpoint).create_bucket(Bucket=name)
    with _source(settings, _own_config(own_moto, name), timeout=0.5) as source:
        os.kill(own_moto.pid, signal.SIGSTOP)  # the port still accepts; nothing answers
        try:
            with pytest.raises(SourceUnavailable, match=r"did not answer within 0\.5 s"):
                list(source.entries())
        finally:
            os.kill(own_moto.pid, signal.SIGCONT)


class _Failing(http.server.BaseHTTPRequestHandler):
    """Answers every request with the S3 error in :attr:`server.answer` (status, code), counting them."""

    def do_GET(self) -> None:
        status, code = self.server.answer  # type: ignore[attr-defined]
        self.server.requests += 1  # type: ignore[attr-defined]
        body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>Please try later.</Message></Error>".encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        return None


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (500, "InternalError"), (503, "ServiceUnavailable")])
def test_a_busy_or_failing_server_is_unavailable_after_botocores_retries(settings, status, code):
    """A real HTTP server on a loopback port answering as an overloaded or failing S3 does."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    server.answer, server.requests = (status, code), 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    config = {"bucket": "busy", "endpoint_url": endpoint, "access_key_id": "k", "secret_access_key": S3_TEST_SECRET}
    try:
        with _source(settings, config) as source, pytest.raises(SourceUnavailable) as info:
            list(source.entries())
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert f"answered {code}: Please try later." in str(info.value) and "next run tries again" in str(info.value)
    assert server.requests == 4  # type: ignore[attr-defined]  # botocore's standard mode: three retries
    _secret_nowhere(S3_TEST_SECRET, info.value, source)


# -- a listing of 100,000 keys ---------------------------------------------------------------------------------


@pytest.fixture
def moto_100k() -> Iterator[MotoServer]:
    """A moto server of this test's own holding bucket ``big-bucket`` with 100,000 keys under ``big/``."""
    with moto_server(preload=("big-bucket", "big/", 100_000)) as server:
        yield server


@pytest.mark.slow
def test_a_listing_of_100_000_keys_holds_one_page_in_memory(settings, moto_100k):
    """moto answers a page in time proportional to the bucket's size: the listing takes about a minute."""
    n = 100_000
    with _source(settings, _own_config(moto_100k, "big-bucket", prefix="big"), timeout=60) as source:
        count, seen = 0, set()
        tracemalloc.start()
        try:
            for e in source.entries():
                count += 1
                if count % 1000 == 1:
                    seen.add(e.path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert count == n and preloaded_key("", 0) in seen
    # one page of 1,000 keys parsed is a few MB; 100,000 entries kept would be tens of MB
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB"
