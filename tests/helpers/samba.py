"""A real Samba server for the SMB source's tests and the benchmark: Debian's ``smbd`` as a child
process on a free loopback port, with its own ``smb.conf`` and every folder it writes (lock, state,
private, cache, pid, logs, the tdbsam password database) in a temp folder, one share ``docs`` whose
files are a folder of this machine (:attr:`Samba.root`: a temp folder of its own, which the ``kn_``
users can reach, removed by :meth:`Samba.remove`), NT ACLs stored in the ``security.NTACL``
extended attribute (``vfs objects = acl_xattr``, ``acl_xattr:ignore system acls = yes``: an ACL is kept
as it is given, not mapped onto the file's POSIX mode).

Accounts: Samba users need Unix accounts, so :data:`USERS` (names prefixed ``kn_``) are made with
``useradd`` when absent (the tests run as root; the apt package ``passwd`` has it) and given their
passwords with ``smbpasswd -a -s``; :data:`GROUP` (``kn_hr``, holding ``kn_ana``) with ``groupadd``.
``kn_svc`` is the account the source signs in as: an ``admin user`` of the share, so it reads every
file whatever its ACL says (as a backup operator would on Windows), and a file readable "by one user
only" can still be synced.

Stop the server (:meth:`Samba.stop`) for the "server down" fault: the whole process group (smbd forks
one child per client) is killed.

Under CI=true a Samba that cannot start fails the test (:func:`tests.helpers.env.missing_server`);
elsewhere it skips. Apt package: ``samba`` (smbd, pdbedit, smbpasswd, and python3-samba, whose SDDL
encoder :func:`sddl_to_binary` uses). ACLs are set over SMB (:meth:`Samba.set_acl`): ``smbcacls``
cannot reach a port other than 445.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.api import free_port
from tests.helpers.env import missing_server

SMBD = "/usr/sbin/smbd"
SHARE = "docs"
#: Samba user -> password. Never real ones; the tests grep their output for these.
USERS = {
    "kn_svc": "svc-Smb-pw-7f3a9",
    "kn_ana": "ana-Smb-pw-1c2d3",
    "kn_bo": "bo-Smb-pw-4e5f6",
}
#: The account the source signs in as.
SERVICE_USER = "kn_svc"
#: A Unix group (its SID is Samba's S-1-22-2-<gid>) and its members.
GROUP, GROUP_MEMBERS = "kn_hr", ("kn_ana",)
#: Well-known SIDs (MS-DTYP 2.4.2.4).
EVERYONE, AUTHENTICATED_USERS = "S-1-1-0", "S-1-5-11"


def _need(tool: str) -> str:
    found = shutil.which(tool) or (tool if Path(tool).exists() else None)
    if not found:
        missing_server("Samba", f"{tool} is not installed (apt-get install samba passwd)")
    return str(found)


def _run(args: list[str], *, input: str | None = None, timeout: float = 60) -> str:
    done = subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"{args[0]} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-500:]}")
    return done.stdout


#: The system's Python, which has python3-samba (the venv does not).
SYSTEM_PYTHON = "/usr/bin/python3"
_SDDL_SCRIPT = """
import sys
from samba.dcerpc import security
from samba.ndr import ndr_pack
sd = security.descriptor.from_sddl(sys.argv[1], security.dom_sid("S-1-5-21-0-0-0"))
sys.stdout.write(ndr_pack(sd).hex())
"""


def sddl_to_binary(sddl: str) -> bytes:
    """The self-relative security descriptor ([MS-DTYP] 2.4.6) of ``sddl``, made by Samba's own
    ``security.descriptor.from_sddl`` (python3-samba, run by the system's Python)."""
    if not Path(SYSTEM_PYTHON).exists():
        missing_server("Samba", "python3-samba is not installed (apt-get install samba)")
    out = _run([SYSTEM_PYTHON, "-c", _SDDL_SCRIPT, sddl])
    if not out.strip():
        raise ValueError(f"Samba could not read the SDDL {sddl!r}")
    return bytes.fromhex(out.strip())


def ensure_accounts() -> None:
    """The Unix accounts of :data:`USERS` and the group :data:`GROUP` holding :data:`GROUP_MEMBERS`
    (as root; what exists is left as it is). Test processes running at once take turns (a lock file in
    the temp folder), so two never race on ``/etc/passwd``."""

    def missing() -> bool:
        try:
            members = grp.getgrnam(GROUP).gr_mem
            for user in USERS:
                pwd.getpwnam(user)
        except KeyError:
            return True
        return not set(GROUP_MEMBERS) <= set(members)

    if not missing():
        return
    if os.geteuid() != 0:
        missing_server("Samba", f"the Unix accounts {', '.join(USERS)} are missing and only root can add them")
    with open(Path(tempfile.gettempdir()) / "kn-samba-accounts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            grp.getgrnam(GROUP)
        except KeyError:
            _run([_need("groupadd"), GROUP])
        for user in USERS:
            try:
                pwd.getpwnam(user)
            except KeyError:
                _run([_need("useradd"), "-M", "-N", "-s", "/usr/sbin/nologin", user])
        for user in GROUP_MEMBERS:
            if user not in grp.getgrnam(GROUP).gr_mem:
                _run([_need("usermod"), "-a", "-G", GROUP, user])


@dataclass
class Samba:
    """A running smbd: :attr:`host` ``127.0.0.1``, :attr:`port`, the share :data:`SHARE` whose files are
    :attr:`root`, its :attr:`conf` and :attr:`folder`; :attr:`sids` maps each user and the group to its SID."""

    host: str
    port: int
    folder: Path
    conf: Path
    root: Path
    process: subprocess.Popen | None
    sids: dict[str, str] = field(default_factory=dict)

    @property
    def share(self) -> str:
        return SHARE

    def config(self, **more: object) -> dict[str, object]:
        """A source config for the share, signed in as :data:`SERVICE_USER` (``more`` overrides)."""
        cfg: dict[str, object] = {
            "host": self.host,
            "port": self.port,
            "share": SHARE,
            "username": SERVICE_USER,
            "password": USERS[SERVICE_USER],
        }
        cfg.update(more)
        return cfg

    def write(self, path: str, data: bytes | str) -> Path:
        """Write a file of the share (``a/b.txt``) directly on disk (its folders made)."""
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        return target

    def set_acl(self, path: str, dacl: str) -> None:
        """Replace the DACL of ``path`` (relative to the share) with ``dacl`` in SDDL ([MS-DTYP] 2.5.1,
        e.g. ``D:P(A;;FR;;;S-1-5-21-...-1001)(D;;FR;;;WD)``), sent over SMB (SET_INFO, [MS-SMB2] 2.2.39)
        as the service account, as a Windows client would. The SDDL is turned into the binary
        descriptor by Samba's own code (python3-samba), not by the code under test."""
        descriptor = sddl_to_binary(dacl)
        with self.smb_session() as (conn, session, tree):
            from smbprotocol.open import (
                CreateDisposition,
                FilePipePrinterAccessMask,
                ImpersonationLevel,
                Open,
                ShareAccess,
                SMB2SetInfoRequest,
                SMB2SetInfoResponse,
            )

            handle = Open(tree, path.replace("/", "\\"))
            handle.create(
                ImpersonationLevel.Impersonation,
                FilePipePrinterAccessMask.WRITE_DAC | FilePipePrinterAccessMask.READ_CONTROL,
                0,
                ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
                CreateDisposition.FILE_OPEN,
                0,
            )
            try:
                request = SMB2SetInfoRequest()
                request["info_type"] = 3  # SMB2_0_INFO_SECURITY
                request["file_info_class"] = 0
                request["additional_information"] = 0x4  # DACL_SECURITY_INFORMATION
                request["file_id"] = handle.file_id
                request["buffer"] = descriptor
                sent = conn.send(request, session.session_id, tree.tree_connect_id)
                SMB2SetInfoResponse().unpack(conn.receive(sent)["data"].get_value())
            finally:
                handle.close()

    @contextlib.contextmanager
    def smb_session(self, user: str = SERVICE_USER) -> Iterator[tuple[Any, Any, Any]]:
        """An smbprotocol (connection, session, tree) on the share as ``user``, closed after."""
        from smbprotocol.connection import Connection
        from smbprotocol.session import Session
        from smbprotocol.tree import TreeConnect

        conn = Connection(uuid.uuid4(), self.host, self.port)
        conn.connect(timeout=10)
        try:
            session = Session(conn, user, USERS[user], require_encryption=False)
            session.connect()
            tree = TreeConnect(session, rf"\\{self.host}\{SHARE}")
            tree.connect()
            yield conn, session, tree
        finally:
            with contextlib.suppress(Exception):  # after a refused open Samba may refuse the tree disconnect
                conn.disconnect(True)

    def read_as(self, user: str, path: str) -> bytes:
        """The bytes of ``path`` read over SMB as ``user`` (PermissionError when Samba denies it): shows
        that an ACL the tests set is the one Samba enforces."""
        from smbprotocol.exceptions import AccessDenied
        from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask, ImpersonationLevel, Open, ShareAccess

        with self.smb_session(user) as (_conn, _session, tree):
            handle = Open(tree, path.replace("/", "\\"))
            try:
                handle.create(
                    ImpersonationLevel.Impersonation,
                    FilePipePrinterAccessMask.FILE_READ_DATA,
                    0,
                    ShareAccess.FILE_SHARE_READ,
                    CreateDisposition.FILE_OPEN,
                    0x40,
                )
            except AccessDenied:
                raise PermissionError(f"{user} may not read {path}") from None
            try:
                return handle.read(0, handle.end_of_file or 1) if handle.end_of_file else b""
            finally:
                handle.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start smbd (again, after :meth:`stop`) on the same port and folders."""
        if self.running:
            return
        log = (self.folder / "smbd.out").open("ab")
        self.process = subprocess.Popen(
            [SMBD, "--foreground", "--no-process-group", "--debug-stdout", "-d", "1", "-s", str(self.conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() kills the children with it
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            with socket.socket() as s:
                s.settimeout(0.2)
                if s.connect_ex((self.host, self.port)) == 0:
                    return
            time.sleep(0.05)
        out = (self.folder / "smbd.out").read_text(errors="replace")[-800:]
        self.stop()
        missing_server("Samba", f"smbd did not listen on port {self.port}: {out}")

    def remove(self) -> None:
        """Stop the server and delete the share's files (:attr:`root`)."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def stop(self) -> None:
        """Kill smbd and its children (the server is down: connections are reset, new ones refused)."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)


def _conf(folder: Path, root: Path, port: int) -> str:
    dirs = {name: folder / name for name in ("lock", "state", "private", "cache", "pid", "ncalrpc", "logs")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    dirs["private"].chmod(0o700)
    return f"""[global]
    workgroup = KNTEST
    netbios name = KNTEST{port}
    server role = standalone server
    security = user
    passdb backend = tdbsam:{dirs["private"] / "passdb.tdb"}
    lock directory = {dirs["lock"]}
    state directory = {dirs["state"]}
    cache directory = {dirs["cache"]}
    private dir = {dirs["private"]}
    pid directory = {dirs["pid"]}
    ncalrpc dir = {dirs["ncalrpc"]}
    log file = {dirs["logs"] / "log.%m"}
    smb ports = {port}
    interfaces = 127.0.0.1
    bind interfaces only = yes
    disable netbios = yes
    load printers = no
    printing = bsd
    printcap name = /dev/null
    disable spoolss = yes
    usershare path =
    map to guest = never
    server min protocol = SMB2_10
    server signing = auto
    smb encrypt = if_required

[{SHARE}]
    path = {root}
    read only = no
    browseable = yes
    vfs objects = acl_xattr
    acl_xattr:ignore system acls = yes
    admin users = {SERVICE_USER}
    create mask = 0644
"""


def start_samba(folder: Path, files: dict[str, bytes | str] | None = None) -> Samba:
    """Start smbd with its configuration and state in ``folder`` (made by the caller, e.g.
    ``tmp_path_factory.mktemp``), serving a new temp folder (:attr:`Samba.root`; :meth:`Samba.remove`
    deletes it) as :data:`SHARE`, with ``files`` (path -> bytes) written first.

    Skips (fails under CI=true) when Samba is not installed or does not start."""
    if not Path(SMBD).exists():
        missing_server("Samba", "smbd is not installed (apt-get install samba smbclient)")
    for tool in ("smbpasswd", "pdbedit"):
        _need(tool)
    ensure_accounts()
    # The share's folder must be reachable by the kn_ users (Samba opens files as them): not under
    # pytest's 0700 folders but in a folder of its own in the temp root, removed by Samba.remove().
    root = Path(tempfile.mkdtemp(prefix="kn-smb-share-"))
    root.chmod(0o755)
    port = free_port()
    conf = folder / "smb.conf"
    conf.write_text(_conf(folder, root, port))
    sids: dict[str, str] = {}
    for user, password in USERS.items():
        _run([_need("smbpasswd"), "-c", str(conf), "-a", "-s", user], input=f"{password}\n{password}\n")
        out = _run([_need("pdbedit"), "-s", str(conf), "-L", "-v", "-u", user])
        found = re.search(r"User SID:\s*(S-[0-9-]+)", out)
        if not found:
            raise RuntimeError(f"pdbedit printed no SID for {user}: {out[-300:]}")
        sids[user] = found.group(1)
    sids[GROUP] = f"S-1-22-2-{grp.getgrnam(GROUP).gr_gid}"  # Samba's "Unix Group" SIDs
    samba = Samba("127.0.0.1", port, folder, conf, root, None, sids)
    for path, data in (files or {}).items():
        samba.write(path, data)
    samba.start()
    return samba


def small_files(n: int, *, per_folder: int = 500, size: int = 200) -> Iterator[tuple[str, bytes]]:
    """``n`` small text files (``f0003/file000123.txt`` -> about ``size`` bytes of words, each unique),
    ``per_folder`` to a folder: what the benchmark syncs."""
    words = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
    for i in range(n):
        text = f"Document {i} of the benchmark share. "
        j = i
        while len(text) < size:
            text += words[j % len(words)] + " "
            j = j // 3 + 7
        yield f"f{i // per_folder:04d}/file{i:06d}.txt", text.encode()


def start_samba_with_files(folder: Path, n: int, *, per_folder: int = 500, size: int = 200) -> Samba:
    """A server whose share holds ``n`` generated small files (:func:`small_files`), written on disk
    before smbd starts (no ACL of their own: Samba shows the POSIX mode, Everyone may read)."""
    samba = start_samba(folder)
    for path, data in small_files(n, per_folder=per_folder, size=size):
        samba.write(path, data)
    return samba


@contextlib.contextmanager
def samba_server(folder: Path, files: dict[str, bytes | str] | None = None) -> Iterator[Samba]:
    """:func:`start_samba` until the block ends, then stopped."""
    samba = start_samba(folder, files)
    try:
        yield samba
    finally:
        samba.remove()


__all__ = [
    "AUTHENTICATED_USERS",
    "EVERYONE",
    "GROUP",
    "GROUP_MEMBERS",
    "SERVICE_USER",
    "SHARE",
    "USERS",
    "Samba",
    "ensure_accounts",
    "samba_server",
    "sddl_to_binary",
    "small_files",
    "start_samba",
    "start_samba_with_files",
]
