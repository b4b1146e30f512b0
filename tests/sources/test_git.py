"""The Git source (knowledge/sources/git.py) against real repositories: file://, dulwich's smart HTTP
behind basic auth, and Debian's sshd running git-upload-pack (tests/helpers/gitserver.py)."""

from __future__ import annotations

import io
import logging
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge.config import Settings
from knowledge.errors import InvalidArgument
from knowledge.sources.base import (
    Entry,
    EntryGone,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)
from knowledge.sources.git import MIRROR, GitSource, parse_remote
from tests.helpers.gitserver import GIT_PASSWORD, GIT_USER, GitHttpServer, GitSshServer, WorkRepo, start_sshd

FILES = {
    "README.md": "# Handbook\nThe team's handbook.\n",
    "docs/intro.md": "Welcome to the team. Coffee is on the second floor.\n",
    "docs/deep/policy.txt": "Expenses are filed within 30 days.\n",
    "docs/same.txt": "Equal bytes.\n",
    "other/same.txt": "Equal bytes.\n",
}
LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
)


@pytest.fixture
def repo(tmp_path: Path) -> WorkRepo:
    r = WorkRepo(tmp_path / "repo")
    r.commit(FILES, message="first")
    return r


def source(settings: Settings, cache: Path | None, timeout: float = 30.0, **config: Any) -> GitSource:
    return GitSource(config, SourceContext(settings=settings, cache_dir=cache, timeout=timeout))


def listing(src: GitSource) -> dict[str, Entry]:
    entries = list(src.entries())
    by_path = {e.path: e for e in entries}
    assert len(by_path) == len(entries), "paths are unique"
    return by_path


def read(src: GitSource, entry: Entry) -> bytes:
    out = io.BytesIO()
    src.fetch(entry, out)
    return out.getvalue()


def http_repo(server: GitHttpServer) -> tuple[WorkRepo, str]:
    name = f"r{uuid.uuid4().hex[:10]}"
    r = WorkRepo(server.root / name)
    r.commit(FILES, message="first")
    return r, server.url(name)


# -- listing and reading ----------------------------------------------------------------------------------


def test_entries_at_head_cite_the_commit_and_skip_links(
    repo: WorkRepo, settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo.add_symlink("docs/link-to-readme", "../README.md")
    repo.add_gitlink("vendor/lib", "0123456789abcdef0123456789abcdef01234567")
    head = repo.commit({"big/asset.bin": LFS_POINTER}, message="links and an LFS pointer")
    caplog.set_level(logging.DEBUG, logger="knowledge.sources.git")
    with source(settings, tmp_path / "cache", url=repo.url) as src:
        assert src.marker() == head
        entries = listing(src)
        assert set(entries) == {*FILES, "big/asset.bin"}
        for path, entry in entries.items():
            blob = repo.blob(path)
            assert entry.version == entry.content_key == blob
            assert entry.attributes == {"commit": head}
            assert entry.url == f"{repo.url}@{head}:{path}"
            assert entry.readers is None
        assert entries["docs/same.txt"].content_key == entries["other/same.txt"].content_key
        assert read(src, entries["docs/deep/policy.txt"]) == FILES["docs/deep/policy.txt"].encode()
        assert read(src, entries["big/asset.bin"]) == LFS_POINTER.encode(), "an LFS pointer is read as it is"
    logged = caplog.text
    assert "skipped symbolic link docs/link-to-readme" in logged
    assert "skipped submodule vendor/lib" in logged
    assert (tmp_path / "cache" / MIRROR / "HEAD").is_file(), "the mirror is kept in the cache folder"


def test_a_folder_inside_the_repository(repo: WorkRepo, settings: Settings, tmp_path: Path) -> None:
    head = repo.head()
    with source(settings, tmp_path / "cache", url=repo.url, path="/docs/") as src:
        entries = listing(src)
        assert set(entries) == {"intro.md", "deep/policy.txt", "same.txt"}
        assert entries["deep/policy.txt"].url == f"{repo.url}@{head}:docs/deep/policy.txt"
        assert entries["intro.md"].version == repo.blob("docs/intro.md")
        assert "folder docs" in src.location()
    with source(settings, tmp_path / "cache", url=repo.url, path="docs/deep") as src:
        assert set(listing(src)) == {"policy.txt"}
    with source(settings, tmp_path / "cache", url=repo.url, path="nowhere") as src, pytest.raises(SourceNotFound) as err:
        list(src.entries())
    assert "no folder 'nowhere'" in str(err.value)
    with source(settings, tmp_path / "cache", url=repo.url, path="README.md") as src, pytest.raises(SourceNotFound) as err:
        list(src.entries())
    assert "is a file, not a folder" in str(err.value)


def test_a_second_commit_changes_renames_and_deletes(repo: WorkRepo, settings: Settings, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with source(settings, cache, url=repo.url) as src:
        before = listing(src)
    second = repo.commit(
        {"docs/intro.md": "Welcome. Coffee moved to the third floor.\n", "new.md": "Brand new.\n"},
        rename={"docs/deep/policy.txt": "policies/expenses.txt"},
        delete=["other/same.txt"],
        message="second",
    )
    with source(settings, cache, url=repo.url) as src:
        assert src.marker() == second
        after = listing(src)
        assert set(after) == {"README.md", "docs/intro.md", "docs/same.txt", "new.md", "policies/expenses.txt"}
        assert after["docs/intro.md"].version != before["docs/intro.md"].version, "changed"
        assert after["README.md"].version == before["README.md"].version, "unchanged"
        renamed, gone = after["policies/expenses.txt"], before["docs/deep/policy.txt"]
        assert (renamed.version, renamed.content_key) == (gone.version, gone.content_key), "a rename keeps the key"
        assert renamed.url == f"{repo.url}@{second}:policies/expenses.txt"
        assert all(e.attributes == {"commit": second} for e in after.values())
        assert read(src, after["docs/intro.md"]) == b"Welcome. Coffee moved to the third floor.\n"


def test_the_marker_changes_only_with_a_new_commit(repo: WorkRepo, settings: Settings, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with source(settings, cache, url=repo.url) as src:
        first = src.marker()
    with source(settings, cache, url=repo.url) as src:
        assert src.marker() == first
    repo.git("tag", "v1")  # a tag is not a commit on the branch
    with source(settings, cache, url=repo.url) as src:
        assert src.marker() == first
    second = repo.commit({"README.md": "# Handbook, second edition\n"})
    with source(settings, cache, url=repo.url) as src:
        assert src.marker() == second != first


def test_the_default_branch_is_the_remotes_head_and_another_can_be_chosen(settings: Settings, tmp_path: Path) -> None:
    r = WorkRepo(tmp_path / "repo", branch="trunk")
    trunk = r.commit({"on-trunk.md": "trunk\n"})
    r.git("checkout", "-q", "-b", "feature")
    feature = r.commit({"on-feature.md": "feature\n"})
    r.git("checkout", "-q", "trunk")
    with source(settings, tmp_path / "c1", url=r.url) as src:
        assert src.marker() == trunk
        assert set(listing(src)) == {"on-trunk.md"}
        assert src.check() == f"reached; branch trunk at commit {trunk[:12]}, 1 file"
    with source(settings, tmp_path / "c1", url=r.url, branch="feature") as src:
        assert src.marker() == feature
        assert set(listing(src)) == {"on-trunk.md", "on-feature.md"}
    with source(settings, tmp_path / "c1", url=r.url, branch="no-such-branch") as src, pytest.raises(SourceNotFound) as err:
        src.marker()
    assert "has no branch 'no-such-branch'" in str(err.value)


def test_without_a_cache_folder_a_temp_mirror_is_used_and_removed(repo: WorkRepo, settings: Settings) -> None:
    src = source(settings, None, url=repo.url)
    entries = listing(src)
    assert read(src, entries["README.md"]) == FILES["README.md"].encode()
    temp = src._temp
    assert temp is not None and temp.exists()
    src.close()
    assert not temp.exists()


def test_fetch_of_a_blob_the_repository_never_had_is_entry_gone(repo: WorkRepo, settings: Settings, tmp_path: Path) -> None:
    with source(settings, tmp_path / "cache", url=repo.url) as src:
        list(src.entries())
        with pytest.raises(EntryGone):
            read(src, Entry(path="ghost.md", version="ab" * 20))


def test_a_mirror_left_with_a_half_written_pack_still_works(repo: WorkRepo, settings: Settings, tmp_path: Path) -> None:
    """A run killed while a pack was written leaves a .pack without its .idx: it is ignored."""
    cache = tmp_path / "cache"
    with source(settings, cache, url=repo.url) as src:
        src.marker()
    (cache / MIRROR / "objects" / "pack" / "pack-deadbeef.pack").write_bytes(b"PACK\x00\x00\x00\x02 truncated")
    head = repo.commit({"after.md": "after the crash\n"})
    with source(settings, cache, url=repo.url) as src:
        assert src.marker() == head
        entries = listing(src)
        assert read(src, entries["after.md"]) == b"after the crash\n"


def test_an_empty_or_missing_repository_is_not_found(settings: Settings, tmp_path: Path) -> None:
    empty = WorkRepo(tmp_path / "empty")
    with source(settings, tmp_path / "c", url=empty.url) as src, pytest.raises(SourceNotFound) as err:
        src.marker()
    assert "has no commit yet" in str(err.value)
    with source(settings, tmp_path / "c2", url=(tmp_path / "nothing").as_uri()) as src, pytest.raises(SourceNotFound):
        src.marker()


@pytest.mark.parametrize(
    "url",
    [
        "ftp://host/repo",
        "just-a-word",
        "https:///no-host",
        "file://otherhost/x",
        "https://user:pw-in-url-secret@host/r",
        "user:pw-in-url-secret@host:team/r.git",
    ],
)
def test_urls_that_cannot_work_are_refused(url: str, settings: Settings) -> None:
    with pytest.raises(InvalidArgument) as err:
        source(settings, None, url=url)
    assert "pw-in-url-secret" not in str(err.value)
    assert err.value.param == "url"


def test_remote_forms() -> None:
    assert parse_remote("git@host.example:team/docs.git") == parse_remote("git@host.example:team/docs.git")
    scp = parse_remote("git@host.example:team/docs.git")
    assert (scp.scheme, scp.user, scp.host, scp.port, scp.path) == ("ssh", "git", "host.example", None, "team/docs.git")
    ssh = parse_remote("ssh://ana@host.example:2222/srv/docs.git")
    assert (ssh.scheme, ssh.user, ssh.host, ssh.port, ssh.path) == ("ssh", "ana", "host.example", 2222, "/srv/docs.git")
    http = parse_remote("https://bo@git.example.org/team/docs.git")
    assert (http.display, http.user) == ("https://git.example.org/team/docs.git", "bo")


# -- HTTP -------------------------------------------------------------------------------------------------


def _packs(cache: Path) -> set[Path]:
    return set((cache / MIRROR / "objects" / "pack").glob("*.pack"))


def test_http_reads_the_branch_and_fetches_only_new_objects(
    git_http_server: GitHttpServer, settings: Settings, tmp_path: Path
) -> None:
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.pack import load_pack_index

    r, url = http_repo(git_http_server)
    cache = tmp_path / "cache"
    config = {"url": url, "username": GIT_USER, "password": GIT_PASSWORD}
    with source(settings, cache, **config) as src:
        entries = listing(src)
        assert set(entries) == set(FILES)
        assert entries["README.md"].url == f"{url}@{r.head()}:README.md"
        assert read(src, entries["docs/intro.md"]) == FILES["docs/intro.md"].encode()
    first_packs = _packs(cache)
    with source(settings, cache, **config) as src:
        src.marker()
    assert _packs(cache) == first_packs, "no new commit: nothing fetched"
    second = r.commit({"docs/intro.md": "Changed.\n"})
    with source(settings, cache, **config) as src:
        assert src.marker() == second
        assert read(src, listing(src)["docs/intro.md"]) == b"Changed.\n"
    (new_pack,) = _packs(cache) - first_packs
    index = load_pack_index(str(new_pack.with_suffix(".idx")), DEFAULT_OBJECT_FORMAT)
    try:
        # the commit, the root tree, docs/ and the changed blob: nothing the mirror had
        assert len(index) == 4
    finally:
        index.close()


def test_http_wrong_or_missing_credentials_are_auth_failed_without_the_password(
    git_http_server: GitHttpServer, settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    _, url = http_repo(git_http_server)
    wrong = "wrong-" + GIT_PASSWORD
    messages = []
    for config in ({"password": wrong, "username": GIT_USER}, {}, {"password": wrong}):
        with source(settings, tmp_path / "cache", url=url, **config) as src, pytest.raises(SourceAuthFailed) as err:
            list(src.entries())
        assert "HTTP 401" in str(err.value)
        messages.append(f"{err.value}|{err.value!r}|{src.location()}")
    text = "\n".join(messages) + caplog.text + "".join(capfd.readouterr())
    assert wrong not in text and GIT_PASSWORD not in text


def test_http_forbidden_and_server_errors(git_http_server: GitHttpServer, settings: Settings, tmp_path: Path) -> None:
    _, url = http_repo(git_http_server)
    config = {"url": url, "username": GIT_USER, "password": GIT_PASSWORD}
    try:
        git_http_server.fail_with = "403 Forbidden"
        with source(settings, tmp_path / "c", **config) as src, pytest.raises(SourceAuthFailed) as err:
            src.marker()
        assert "HTTP 403" in str(err.value)
        git_http_server.fail_with = "503 Service Unavailable"
        with source(settings, tmp_path / "c", **config) as src, pytest.raises(SourceUnavailable) as unavailable:
            src.marker()
        assert "HTTP 503" in str(unavailable.value)
    finally:
        git_http_server.fail_with = None


def test_http_unknown_repository_or_branch_is_not_found(
    git_http_server: GitHttpServer, settings: Settings, tmp_path: Path
) -> None:
    _, url = http_repo(git_http_server)
    creds = {"username": GIT_USER, "password": GIT_PASSWORD}
    with source(settings, tmp_path / "c", url=url + "-missing", **creds) as src, pytest.raises(SourceNotFound):
        src.marker()
    with source(settings, tmp_path / "c", url=url, branch="nope", **creds) as src, pytest.raises(SourceNotFound) as err:
        src.marker()
    assert "no branch 'nope'" in str(err.value)


def test_http_server_stopped_is_unavailable(settings: Settings, tmp_path: Path) -> None:
    server = GitHttpServer(tmp_path / "srv").start()
    r = WorkRepo(tmp_path / "srv" / "repo")
    first = r.commit(FILES)
    config = {"url": server.url("repo"), "username": GIT_USER, "password": GIT_PASSWORD}
    try:
        with source(settings, tmp_path / "cache", **config) as src:
            assert src.marker() == first
        server.stop()
        second = r.commit({"README.md": "while the server was down\n"})
        with source(settings, tmp_path / "cache", **config) as src, pytest.raises(SourceUnavailable) as err:
            src.marker()
        assert "could not be reached" in str(err.value) and GIT_PASSWORD not in str(err.value)
        server.start()
        with source(settings, tmp_path / "cache", **config) as src:
            assert src.marker() == second, "the next run converges"
    finally:
        server.stop()


def test_a_server_that_does_not_answer_times_out(settings: Settings, tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/repo"
        with source(settings, tmp_path / "c", timeout=0.5, url=url) as src, pytest.raises(SourceUnavailable) as err:
            src.marker()
    assert "did not answer within 0.5 seconds" in str(err.value)


# -- SSH --------------------------------------------------------------------------------------------------


@pytest.fixture
def ssh_repo(tmp_path: Path) -> WorkRepo:
    r = WorkRepo(tmp_path / "ssh-repo")
    r.commit(FILES)
    return r


def test_ssh_reads_with_the_key_and_known_hosts(
    git_sshd: GitSshServer, ssh_repo: WorkRepo, settings: Settings, tmp_path: Path
) -> None:
    url = git_sshd.url(ssh_repo.folder)
    with source(settings, tmp_path / "c", url=url, ssh_key=git_sshd.client_key, known_hosts=git_sshd.known_hosts) as src:
        entries = listing(src)
        assert set(entries) == set(FILES)
        assert entries["README.md"].url == f"{url}@{ssh_repo.head()}:README.md"
        assert read(src, entries["docs/intro.md"]) == FILES["docs/intro.md"].encode()
    scp_like = f"{git_sshd.user}@127.0.0.1:{ssh_repo.folder}"
    second = ssh_repo.commit({"new.md": "over ssh\n"})
    # without known_hosts the first key is pinned in the cache folder (accept-new); the scp form needs port 22,
    # so the port comes from an ssh:// URL here and the scp form is checked for parsing only
    with source(settings, tmp_path / "c2", url=url, ssh_key=git_sshd.client_key) as src:
        assert src.marker() == second
    host_key = git_sshd.known_hosts.split()[2]
    assert host_key in (tmp_path / "c2" / "known_hosts").read_text()
    assert parse_remote(scp_like).path == str(ssh_repo.folder)


def test_ssh_refused_key_is_auth_failed_without_the_key(
    git_sshd: GitSshServer, ssh_repo: WorkRepo, settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = git_sshd.url(ssh_repo.folder)
    with (
        source(settings, tmp_path / "c", url=url, ssh_key=git_sshd.stranger_key, known_hosts=git_sshd.known_hosts) as src,
        pytest.raises(SourceAuthFailed) as err,
    ):
        src.marker()
    assert "refused the key" in str(err.value)
    body = [line for line in git_sshd.stranger_key.splitlines() if "PRIVATE KEY" not in line]
    text = str(err.value) + repr(err.value) + caplog.text
    assert not any(line in text for line in body if line)


def test_ssh_changed_host_key_is_refused(
    git_sshd: GitSshServer, ssh_repo: WorkRepo, settings: Settings, tmp_path: Path
) -> None:
    url = git_sshd.url(ssh_repo.folder)
    with (
        source(
            settings, tmp_path / "c", url=url, ssh_key=git_sshd.client_key, known_hosts=git_sshd.wrong_known_hosts
        ) as src,
        pytest.raises(SourceError) as err,
    ):
        src.marker()
    assert not isinstance(err.value, SourceAuthFailed | SourceUnavailable)
    assert "host key other than the known one" in str(err.value)


def test_ssh_unknown_repository_is_not_found(git_sshd: GitSshServer, settings: Settings, tmp_path: Path) -> None:
    url = git_sshd.url(tmp_path / "no-repo-here")
    with (
        source(settings, tmp_path / "c", url=url, ssh_key=git_sshd.client_key, known_hosts=git_sshd.known_hosts) as src,
        pytest.raises(SourceNotFound),
    ):
        src.marker()


def test_ssh_server_stopped_is_unavailable(ssh_repo: WorkRepo, settings: Settings, tmp_path: Path) -> None:
    sshd = start_sshd(tmp_path / "own-sshd")
    url = sshd.url(ssh_repo.folder)
    config = {"url": url, "ssh_key": sshd.client_key, "known_hosts": sshd.known_hosts}
    try:
        with source(settings, tmp_path / "c", **config) as src:
            src.marker()
    finally:
        sshd.stop()
    with source(settings, tmp_path / "c", **config) as src, pytest.raises(SourceUnavailable) as err:
        src.marker()
    assert "could not be reached" in str(err.value)


# -- size ---------------------------------------------------------------------------------------------------


def _fast_import(r: WorkRepo, n: int) -> Iterator[bytes]:
    yield b"commit refs/heads/main\ncommitter T <t@example.org> 1700000000 +0000\ndata 4\nmany\n"
    for i in range(n):
        data = f"file {i}\n".encode()
        yield f"M 100644 inline d{i % 100:02d}/f{i:06d}.txt\ndata {len(data)}\n".encode() + data + b"\n"
    yield b"done\n"


@pytest.mark.slow
def test_a_listing_of_100000_files(settings: Settings, tmp_path: Path) -> None:
    r = WorkRepo(tmp_path / "big")
    n = 100_000
    subprocess.run(
        [r.git_exe, "fast-import", "--quiet", "--done"],
        cwd=r.folder,
        input=b"".join(_fast_import(r, n)),
        check=True,
        capture_output=True,
        timeout=300,
    )
    with source(settings, tmp_path / "cache", url=r.url) as src:
        entries = listing(src)
        assert len(entries) == n
        assert read(src, entries["d42/f012342.txt"]) == b"file 12342\n"


def test_a_mirror_with_too_many_packs_is_made_again(
    repo: WorkRepo, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import knowledge.sources.git as git_module

    monkeypatch.setattr(git_module, "MAX_PACKS", 2)
    cache = tmp_path / "cache"
    for i in range(3):  # three fetches that bring objects: three packs
        repo.commit({"README.md": f"# Handbook, edition {i}\n"})
        with source(settings, cache, url=repo.url) as src:
            src.marker()
    assert len(list((cache / MIRROR / "objects" / "pack").glob("*.pack"))) == 3
    head = repo.commit({"README.md": "# Handbook, the last edition\n"})
    with source(settings, cache, url=repo.url) as src:
        assert src.marker() == head
        entries = listing(src)
        assert set(entries) == set(FILES)
        assert read(src, entries["README.md"]) == b"# Handbook, the last edition\n"
    assert len(list((cache / MIRROR / "objects" / "pack").glob("*.pack"))) == 1
