"""Git repositories as a source: one branch's files at its head commit, read with dulwich (pure
Python; the ``ssh`` client is OpenSSH's, run by dulwich).

How it reads:

- A bare mirror of the remote is kept in the source's cache folder (``SourceContext.cache_dir``,
  ``mirror.git``; a temp folder removed by :meth:`GitSource.close` when there is none). Each run fetches
  only the objects the mirror lacks (the Git pack negotiation sends the mirror's commits as "have"
  lines: gitprotocol-pack(5), gitprotocol-v2(5) ``fetch``), so a run costs what changed since the last.
- :meth:`GitSource.marker` is the branch's head commit id: a run whose marker equals the last complete
  run's lists nothing.
- :meth:`GitSource.entries` walks the head commit's tree (trees only; no blob is read). Each regular file
  is an :class:`~knowledge.sources.base.Entry` whose ``version`` and ``content_key`` are its blob id (the
  SHA-1 of its bytes with the blob header, gitformat-object: equal bytes, equal id, at any path: a
  rename is found without reading), ``attributes = {"commit": <head commit id>}`` and ``url``
  ``<remote url>@<commit>:<path in the repository>`` -- a neutral citation, since the web page of a file
  cannot be known from a Git remote's URL (a server's web UI is its own). Submodules (gitlinks, mode
  160000: another repository's commit, not a file) and symbolic links (mode 120000: a path, not
  content; following one could leave the repository) are skipped, with a debug log line. Git LFS
  pointer files are ingested as they are (the pointer's few lines of text, not the large file: LFS
  objects live on another server).
- :meth:`GitSource.fetch` writes a blob's bytes from the mirror.

Remotes: ``file:///path``; ``http://`` and ``https://`` (Git's smart HTTP; the user name and password
or token from the fields, sent as HTTP basic authentication, RFC 7617); ``ssh://user@host[:port]/path``
and ``user@host:path`` (OpenSSH's ``ssh`` in batch mode: the private key field's key, the known_hosts
field's host keys; without known_hosts the server's key is trusted the first time and pinned in the
cache folder, as ``StrictHostKeyChecking=accept-new`` does).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit, urlunsplit

import urllib3.exceptions as u3
from dulwich.client import (
    GitClient,
    HTTPProxyUnauthorized,
    HTTPUnauthorized,
    LocalGitClient,
    SSHGitClient,
    SubprocessSSHVendor,
    Urllib3HttpGitClient,
)
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.file import FileLocked
from dulwich.object_store import tree_lookup_path
from dulwich.objects import Blob, Commit, Tree
from dulwich.protocol import Protocol
from dulwich.repo import Repo

from knowledge.errors import InvalidArgument
from knowledge.sources.base import (
    Entry,
    EntryGone,
    Field,
    Sink,
    Source,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from dulwich.objects import ObjectID
    from dulwich.refs import Ref

log = logging.getLogger(__name__)

#: The user name sent with a token given alone (GitHub, Gitea and Bitbucket take any; GitLab wants
#: ``oauth2``: give it as the user name).
TOKEN_USER = "git"
#: The mirror's folder inside the cache folder.
MIRROR = "mirror.git"
#: Each fetch that brings objects adds a pack to the mirror; past this many the mirror is made again
#: by one full fetch (one pack; commits no longer on the branch left behind), as dulwich's repack holds
#: every object in memory.
MAX_PACKS = 100

_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[^:/\s]+):(?P<path>[^/].*|/.*)$")
_SCP_PASSWORD = re.compile(r"^[^@/\s]*:[^@/\s]*@")  # user:password@host:path
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
_HTTP_STATUS = re.compile(r"unexpected http resp (\d{3})")


@dataclass(frozen=True)
class _Remote:
    """A parsed remote: ``scheme`` (``file``, ``http``, ``https``, ``ssh``), ``display`` (the URL as
    shown: no password), ``host``, ``port``, ``user``, ``path`` (as the server takes it)."""

    scheme: str
    display: str
    path: str
    host: str = ""
    port: int | None = None
    user: str | None = None


def parse_remote(url: str) -> _Remote:
    """``url`` as a :class:`_Remote`.

    Raises:
        InvalidArgument: not a ``file://``, ``http(s)://``, ``ssh://`` or ``user@host:path`` address, or
            one carrying a password (it belongs in the password field; the URL is shown on pages)."""
    url = url.strip()
    if "://" not in url:
        if _SCP_PASSWORD.match(url):
            raise InvalidArgument(
                "The repository URL carries a password: give the URL without it and the password in the password field.",
                param="url",
            )
        m = _SCP_LIKE.match(url)
        if m is None:  # not echoed: it may hold anything
            raise InvalidArgument(
                "A Git repository's URL starts with file://, http://, https:// or ssh://, or is user@host:path.",
                param="url",
            )
        return _Remote("ssh", url, m["path"], host=m["host"], user=m["user"])
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if parts.password is not None:
        raise InvalidArgument(
            "The repository URL carries a password: give the URL without it and the password in the password field.",
            param="url",
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgument("A file:// URL names a folder of this machine (file:///path/to/repo).", param="url")
        return _Remote("file", url, unquote(parts.path))
    if scheme not in ("http", "https", "ssh"):
        raise InvalidArgument(
            f"A Git repository's URL starts with file://, http://, https:// or ssh://, not {scheme}://.", param="url"
        )
    if not parts.hostname:
        raise InvalidArgument(f"The repository URL names no host ({_scrub_url(url)!r}).", param="url")
    try:
        port = parts.port
    except ValueError:
        raise InvalidArgument(f"The repository URL's port is not a number ({_scrub_url(url)!r}).", param="url") from None
    if scheme == "ssh":
        return _Remote("ssh", url, unquote(parts.path), host=parts.hostname, port=port, user=parts.username)
    netloc = parts.netloc.rpartition("@")[2]
    display = urlunsplit((scheme, netloc, parts.path, parts.query, ""))
    return _Remote(scheme, display, parts.path, host=parts.hostname, port=port, user=parts.username)


def _scrub_url(text: str) -> str:
    """``text`` with every URL's user information (``user:password@``) removed."""
    return _USERINFO.sub("", text)


class GitSource(Source):
    """One branch of a Git repository, its files at the head commit (see the module's docstring).

    Config: ``url`` (required), ``branch`` (default: the remote's HEAD), ``path`` (a folder inside the
    repository, default its root), ``username`` and ``password`` (HTTP(S)), ``ssh_key`` and
    ``known_hosts`` (SSH).

    Raises: :class:`SourceUnavailable` (host unreachable, connection refused, timed out, HTTP 5xx),
    :class:`SourceAuthFailed` (HTTP 401/403, SSH key refused), :class:`SourceNotFound` (no repository at
    the URL, no such branch, no such folder at the head), :class:`SourceError` (a changed SSH host key,
    another protocol failure); ``InvalidArgument`` from the constructor for a URL that cannot work."""

    kind = "git"
    title = "Git repository"
    description = "One branch of a Git repository (file://, HTTP(S) or SSH), its files at the latest commit."
    fields = (
        Field(
            "url",
            "Repository URL",
            "file:///srv/git/docs.git, https://git.example.org/team/docs.git, ssh://git@host:2222/team/docs.git"
            " or git@host:team/docs.git; no password in it",
            required=True,
        ),
        Field("branch", "Branch", "the branch to read; blank: the repository's default branch (its HEAD)"),
        Field("path", "Folder", "a folder inside the repository to read (docs/handbook); blank: all of it"),
        Field("username", "User name", f"HTTP(S) only; blank with a token: {TOKEN_USER!r}"),
        Field("password", "Password or token", "HTTP(S) only: the password or an access token", secret=True),
        Field(
            "ssh_key",
            "SSH private key",
            "SSH only: the private key's text (-----BEGIN OPENSSH PRIVATE KEY----- ...), without a passphrase;"
            " blank: this machine's own keys",
            secret=True,
        ),
        Field(
            "known_hosts",
            "SSH known hosts",
            "SSH only: the server's known_hosts lines (ssh-keyscan -p PORT HOST); blank: the key the server"
            " shows first is trusted and kept",
        ),
    )

    def __init__(self, config: Mapping[str, Any], context: SourceContext) -> None:
        super().__init__(config, context)
        self.remote = parse_remote(str(self.required("url")))
        branch = str(self.setting("branch", "")).strip()
        self.branch = branch.removeprefix("refs/heads/") or None
        self.folder = str(self.setting("path", "")).strip().strip("/")
        self._repo: Repo | None = None
        self._temp: Path | None = None
        self._head: str | None = None
        self._branch_ref: bytes | None = None

    # -- the interface ----------------------------------------------------------------------------------
    def location(self) -> str:
        """``<url>`` and, when set, ``, branch <b>`` and ``, folder <p>`` (no credentials)."""
        where = self.remote.display
        if self.branch:
            where += f", branch {self.branch}"
        if self.folder:
            where += f", folder {self.folder}"
        return where

    def marker(self) -> str:
        """The branch's head commit id (40 hex digits), fetched into the mirror first."""
        return self._update()

    def entries(self) -> Iterator[Entry]:
        """The regular files under the folder at the head commit (see the module's docstring); paths are
        relative to the folder. Reads trees only."""
        commit = self._update()
        repo = self._mirror()
        tree_id = self._folder_tree(repo, commit)
        prefix = f"{self.folder}/" if self.folder else ""
        seen: set[str] = set()
        stack: list[tuple[ObjectID, str]] = [(tree_id, "")]
        while stack:
            tid, base = stack.pop()
            tree = repo.object_store[tid]
            assert isinstance(tree, Tree)
            for item in tree.iteritems():
                name = item.path.decode("utf-8", "replace")
                path = f"{base}{name}"
                mode = item.mode
                if stat.S_ISDIR(mode):
                    stack.append((item.sha, f"{path}/"))
                elif stat.S_ISREG(mode):
                    if path in seen:  # two names that are not UTF-8 read the same
                        log.warning(
                            "Git source %s: skipped a second file named %r (names not in UTF-8)", self.location(), path
                        )
                        continue
                    seen.add(path)
                    blob = item.sha.decode("ascii")
                    yield Entry(
                        path=path,
                        version=blob,
                        content_key=blob,
                        url=f"{self.remote.display}@{commit}:{prefix}{path}",
                        attributes={"commit": commit},
                    )
                elif stat.S_IFMT(mode) == 0o160000:
                    log.debug(
                        "Git source %s: skipped submodule %s (another repository's commit, not a file)",
                        self.location(),
                        path,
                    )
                elif stat.S_ISLNK(mode):
                    log.debug("Git source %s: skipped symbolic link %s (a path, not content)", self.location(), path)
                else:
                    log.debug("Git source %s: skipped %s (tree entry mode %o)", self.location(), path, mode)

    def fetch(self, entry: Entry, out: Sink) -> None:
        """Write the blob ``entry.version``'s bytes from the mirror (fetched first when this instance has
        not yet). Raises :class:`EntryGone` when the mirror has no such blob."""
        if self._head is None:
            self._update()
        try:
            blob = self._mirror().object_store[_oid(entry.version)]
        except (KeyError, ValueError, UnicodeEncodeError):
            raise EntryGone(f"{entry.path}: the repository's mirror has no blob {entry.version}.") from None
        if not isinstance(blob, Blob):
            raise EntryGone(f"{entry.path}: {entry.version} is not a file's contents in the repository.")
        for chunk in blob.as_raw_chunks():
            out.write(chunk)

    def check(self) -> str:
        """Fetch the head and count the files under the folder: ``"reached; branch main at commit
        1a2b3c4d5e6f, 12 files"``."""
        commit = self._update()
        n = sum(1 for _ in self.entries())
        branch = self.branch or (self._branch_ref or b"HEAD").decode("utf-8", "replace").removeprefix("refs/heads/")
        return f"reached; branch {branch} at commit {commit[:12]}, {n} file{'' if n == 1 else 's'}"

    def close(self) -> None:
        """Close the mirror; a temp mirror (no cache folder) is deleted."""
        if self._repo is not None:
            self._repo.close()
            self._repo = None
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None

    # -- the mirror ---------------------------------------------------------------------------------------
    def _mirror(self) -> Repo:
        if self._repo is not None:
            return self._repo
        if self.context.cache_dir is not None:
            folder = Path(self.context.cache_dir) / MIRROR
        else:
            self._temp = Path(tempfile.mkdtemp(prefix="knowledge-git-"))
            folder = self._temp / MIRROR
        try:
            if (folder / "HEAD").is_file():
                packs = sum(1 for _ in (folder / "objects" / "pack").glob("*.idx"))
                if packs > MAX_PACKS:
                    log.info("Git source %s: the mirror has %d packs; made again by a full fetch", self.location(), packs)
                    shutil.rmtree(folder)
                else:
                    try:
                        self._repo = Repo(str(folder))
                        return self._repo
                    except NotGitRepository:
                        log.warning("Git source %s: the mirror at %s was unreadable; made again", self.location(), folder)
                        shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True, exist_ok=True)
            self._repo = Repo.init_bare(str(folder))
        except OSError as exc:
            raise SourceError(f"The Git mirror folder {folder} cannot be used: {exc.strerror or exc}.") from None
        return self._repo

    def _update(self) -> str:
        """Fetch the branch's head into the mirror (only objects it lacks), once per instance; its id."""
        if self._head is not None:
            return self._head
        repo = self._mirror()
        wanted = cast("Ref", b"refs/heads/" + self.branch.encode() if self.branch else b"HEAD")
        seen: dict[str, ObjectID | None] = {}

        def determine_wants(refs: Mapping[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
            sha = refs.get(wanted)
            seen["sha"] = sha
            if sha is None or sha in repo.object_store:
                return []
            return [sha]

        with self._client() as (client, path):
            try:
                result = client.fetch(path, repo, determine_wants=determine_wants, ref_prefix=[wanted])
            except Exception as exc:
                raise self._error(exc) from None
        sha = seen.get("sha")
        if not sha:
            if self.branch:
                raise SourceNotFound(f"The Git repository at {self.remote.display} has no branch {self.branch!r}.")
            raise SourceNotFound(f"The Git repository at {self.remote.display} has no commit yet (no default branch).")
        branch_ref = wanted if self.branch else result.symrefs.get(cast("Ref", b"HEAD"), cast("Ref", b"refs/knowledge/HEAD"))
        self._branch_ref = branch_ref
        try:  # the next run's fetch sends it as a "have": only newer objects come
            repo.refs[branch_ref] = sha
        except (
            OSError,
            FileLocked,
        ) as exc:  # another run of the source (a dry run) holds the ref's lock: the next run fetches more
            log.info("Git source %s: the mirror's ref %s was not updated (%s)", self.location(), branch_ref.decode(), exc)
        self._head = sha.decode("ascii")
        log.debug("Git source %s: head %s", self.location(), self._head)
        return self._head

    def _folder_tree(self, repo: Repo, commit: str) -> ObjectID:
        """The tree id of the folder at ``commit``. Raises :class:`SourceNotFound` (no such folder)."""
        obj = repo.object_store[_oid(commit)]
        if not isinstance(obj, Commit):
            raise SourceError(f"The head of {self.location()} is not a commit ({commit}).")
        if not self.folder:
            return obj.tree
        try:
            mode, sha = tree_lookup_path(repo.object_store.__getitem__, obj.tree, self.folder.encode())
        except (KeyError, NotADirectoryError):
            raise SourceNotFound(
                f"The Git repository at {self.remote.display} has no folder {self.folder!r} at commit {commit[:12]}."
            ) from None
        if not stat.S_ISDIR(mode):
            raise SourceNotFound(f"{self.folder!r} in the Git repository at {self.remote.display} is a file, not a folder.")
        return sha

    # -- transport ----------------------------------------------------------------------------------------
    def _client(self) -> _ClientScope:
        return _ClientScope(self)

    def _secrets(self) -> list[str]:
        """The secret values, to blank out of any library message."""
        return [str(v) for k in ("password", "ssh_key") if (v := self.setting(k))] + [
            line for line in str(self.setting("ssh_key", "")).splitlines() if len(line.strip()) >= 16
        ]

    def _scrub(self, text: str) -> str:
        text = _scrub_url(text)
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return text.strip()

    def _error(self, exc: BaseException) -> SourceError:
        """``exc`` (dulwich's, urllib3's, an OSError, ssh's words) as one of the source errors, in words."""
        where = self.remote.display
        if isinstance(exc, SourceError):
            return exc
        if isinstance(exc, NotGitRepository):
            return SourceNotFound(f"There is no Git repository at {where}.")
        if isinstance(exc, HTTPUnauthorized):
            who = "without credentials" if not self.setting("password") else "with the configured user name and password"
            return SourceAuthFailed(
                f"{where} refused the request {who} (HTTP 401): check the user name and password or token."
            )
        if isinstance(exc, HTTPProxyUnauthorized):
            return SourceAuthFailed(
                f"The HTTP proxy refused the request to {where} (HTTP 407): check the proxy's credentials."
            )
        cause = exc.__cause__
        if _is_urllib3_error(exc) or _is_urllib3_error(cause):
            return self._unreachable(cause if _is_urllib3_error(cause) else exc)
        if isinstance(exc, TimeoutError):
            return SourceUnavailable(f"{where} did not answer within {self.context.timeout:g} seconds.")
        if isinstance(exc, ConnectionError | OSError) and not isinstance(exc, FileNotFoundError):
            return SourceUnavailable(f"{where} could not be reached: {self._scrub(str(exc)) or type(exc).__name__}.")
        text = self._scrub(str(exc))
        if isinstance(exc, GitProtocolError):  # HangupException among them
            return self._from_words(text, is_hangup=isinstance(exc, HangupException))
        return SourceError(f"Reading the Git repository at {where} failed: {type(exc).__name__}: {text}")

    def _unreachable(self, exc: BaseException | None) -> SourceError:
        where = self.remote.display
        reason = getattr(exc, "reason", None) or exc
        # urllib3's NewConnectionError (refused, unreachable) is a ConnectTimeoutError by inheritance: test it first
        if isinstance(reason, u3.TimeoutError | TimeoutError) and not isinstance(reason, u3.NewConnectionError):
            return SourceUnavailable(f"{where} did not answer within {self.context.timeout:g} seconds.")
        if isinstance(exc, u3.ProtocolError):  # the answer cut short (IncompleteRead, connection reset)
            return SourceUnavailable(
                f"The connection to {where} broke off while the repository was read; the next run fetches again."
            )
        if isinstance(reason, u3.SSLError):
            return SourceError(f"The TLS connection to {where} failed: {self._scrub(str(reason))}.")
        words = "the connection was refused" if "refused" in str(reason).lower() else self._scrub(str(reason))
        return SourceUnavailable(f"{where} could not be reached: {words}.")

    def _from_words(self, text: str, *, is_hangup: bool) -> SourceError:
        """A protocol failure by its words (an HTTP status in dulwich's message, ssh's or git's stderr)."""
        where = self.remote.display
        low = text.lower()
        status = _HTTP_STATUS.search(text)
        if status:
            code = int(status.group(1))
            if code == 403:
                return SourceAuthFailed(f"{where} refused access to the repository (HTTP 403): the account may not read it.")
            if code == 404:
                return SourceNotFound(f"There is no Git repository at {where} (HTTP 404).")
            if code >= 500:
                return SourceUnavailable(f"{where} answered with a server error (HTTP {code}); the next run may succeed.")
            return SourceError(f"{where} answered HTTP {code}.")
        last = text.splitlines()[-1].strip() if text else ""
        if "host key verification failed" in low or "remote host identification has changed" in low:
            return SourceError(
                f"The SSH server of {where} showed a host key other than the known one (known_hosts): it may not be"
                " the server it claims to be. Check the key and update the known hosts field."
            )
        if "permission denied" in low or "too many authentication failures" in low:
            return SourceAuthFailed(f"The SSH server of {where} refused the key: {last}")
        unreachable = (
            "connection refused",
            "timed out",
            "could not resolve",
            "no route to host",
            "network is unreachable",
            "connection closed",
            "connection reset",
            "broken pipe",
            "kex_exchange_identification",
        )
        broken = ("does not match length prefix", "unexpected eof", "incomplete", "connection broken")
        if any(b in low for b in broken):  # a pkt-line (gitprotocol-common(5)) or the pack cut short
            return SourceUnavailable(
                f"The connection to {where} broke off while the repository was read ({last}); the next run fetches again."
            )
        if any(u in low for u in unreachable):
            return SourceUnavailable(f"{where} could not be reached: {last}")
        if "not a git repository" in low or "does not appear to be a git repository" in low or "no such file" in low:
            return SourceNotFound(f"There is no Git repository at {where}: {last}")
        if is_hangup:
            return SourceUnavailable(f"{where} closed the connection: {last or 'without a word'}")
        return SourceError(f"Reading the Git repository at {where} failed: {last}")


def _oid(hex_id: str) -> ObjectID:
    """A hex object id as dulwich takes it (``ValueError``/``UnicodeEncodeError`` for one not ASCII)."""
    return cast("ObjectID", hex_id.encode("ascii"))


def _is_urllib3_error(exc: BaseException | None) -> bool:
    if exc is None:
        return False
    return isinstance(exc, u3.HTTPError)


class _SshClient(SSHGitClient):
    """dulwich's SSH client that closes every connection it opened (dulwich 1.2 leaves the ``ssh`` process
    and its pipes open when the server hangs up before the protocol starts: a refused key, a changed host
    key, an unknown repository)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opened: list[Protocol] = []

    def _connect(
        self, cmd: bytes, path: str | bytes, protocol_version: int | None = None
    ) -> tuple[Protocol, Callable[[], bool], IO[bytes] | None]:
        proto, can_read, stderr = super()._connect(cmd, path, protocol_version)
        self._opened.append(proto)
        return proto, can_read, stderr

    def close(self) -> None:
        while self._opened:
            try:
                self._opened.pop().close()  # idempotent: dulwich may have closed it
            except (OSError, GitProtocolError) as exc:
                log.debug("closing an ssh connection: %s", type(exc).__name__)


class _ClientScope:
    """``with source._client() as (client, path)``: a dulwich client for the remote and the path to give
    it; for SSH, the key and known_hosts written to a private temp folder, deleted at the end."""

    def __init__(self, source: GitSource) -> None:
        self.source = source
        self.folder: Path | None = None
        self.client: GitClient | None = None

    def __enter__(self) -> tuple[GitClient, str]:
        s, remote = self.source, self.source.remote
        if remote.scheme == "file":
            self.client = LocalGitClient()
            return self.client, remote.path
        if remote.scheme in ("http", "https"):
            password = s.setting("password")
            username = s.setting("username") or remote.user or (TOKEN_USER if password else None)
            self.client = Urllib3HttpGitClient(
                remote.display, username=username, password=password, timeout=s.context.timeout, config=None
            )
            return self.client, ""
        self.folder = Path(tempfile.mkdtemp(prefix="knowledge-ssh-"))
        os.chmod(self.folder, 0o700)
        args = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, round(s.context.timeout))}"]
        alive = max(1, round(s.context.timeout / 3))
        args += ["-o", f"ServerAliveInterval={alive}", "-o", "ServerAliveCountMax=3"]
        key_file: str | None = None
        key = s.setting("ssh_key")
        if key:
            path = self.folder / "key"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(str(key).replace("\r\n", "\n").strip() + "\n")  # OpenSSH needs the final newline
            key_file = str(path)
            args += ["-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none"]
        known = s.setting("known_hosts")
        if known:
            known_file = self.folder / "known_hosts"
            known_file.write_text(str(known).replace("\r\n", "\n").strip() + "\n")
            args += ["-o", f"UserKnownHostsFile={known_file}", "-o", "StrictHostKeyChecking=yes"]
        else:
            pinned = (Path(s.context.cache_dir) if s.context.cache_dir else self.folder) / "known_hosts"
            args += ["-o", f"UserKnownHostsFile={pinned}", "-o", "StrictHostKeyChecking=accept-new"]
        self.client = _SshClient(
            remote.host,
            port=remote.port,
            username=remote.user,
            vendor=SubprocessSSHVendor(),
            key_filename=key_file,
            ssh_command=shlex.join(args),
        )
        return self.client, remote.path

    def __exit__(self, *_exc: object) -> None:
        if self.client is not None:
            self.client.close()
            pool = getattr(self.client, "pool_manager", None)
            if pool is not None:
                pool.clear()  # the HTTP connections: one client serves one fetch
            self.client = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


__all__ = ["MAX_PACKS", "MIRROR", "TOKEN_USER", "GitSource", "parse_remote"]
