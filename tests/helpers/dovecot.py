"""A real IMAP server for the IMAP source's tests: Debian's Dovecot (``dovecot-imapd``) in the
foreground (``dovecot -F -c <conf>``) with a config of its own in a temp folder -- IMAP on a free
loopback port (STARTTLS offered) and IMAPS (implicit TLS) on another, with a server certificate for
``127.0.0.1``/``localhost`` signed by a CA the test makes (``ca_file``); accounts in a passwd-file
each (:meth:`Dovecot.add_user`), mail in maildirs, its run and state folders, its log -- all under that
folder. Messages are delivered by APPEND (:meth:`Dovecot.append`) or written into a maildir
(:meth:`Dovecot.write_maildir`, for many thousands).

Run as root (CI), the mail processes run as ``nobody`` (Dovecot refuses root for mail) and the login
and internal processes as Debian's ``dovenull`` and ``dovecot``: the folder is made outside pytest's
temp folders (those are private to root) with mode 755. Run as another user, everything runs as that
user. :meth:`Dovecot.stop` stops it ("server down"); :meth:`Dovecot.start` starts it again on the same
ports with the same mail.

Under CI=true a Dovecot that is missing or cannot start fails the test
(:func:`tests.helpers.env.missing_server`).
"""

from __future__ import annotations

import contextlib
import getpass
import grp
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path

from imapclient import IMAPClient

from tests.helpers.api import free_port
from tests.helpers.env import missing_server
from tests.helpers.ldap import _certificates

DOVECOT, DOVEADM = "/usr/sbin/dovecot", "/usr/bin/doveadm"


@dataclass
class Dovecot:
    """A Dovecot server: ``host``, ``port`` (plain IMAP, STARTTLS offered), ``tls_port`` (implicit TLS),
    ``ca_file`` (the CA that signed its certificate), ``folder`` (everything of it), ``users``
    (name -> password)."""

    host: str
    port: int
    tls_port: int
    ca_file: Path
    folder: Path
    conf: Path
    users: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None

    # -- accounts and mail ---------------------------------------------------------------------------
    def add_user(self, name: str | None = None, password: str | None = None) -> tuple[str, str]:
        """A new account (a fresh name and password unless given); returns ``(name, password)``.

        A failed sign-in makes Dovecot slow down the next ones from that address (its auth penalty, up
        to 15 s, not configurable in 2.3): tests of wrong passwords use a server of their own."""
        name = name or f"user{len(self.users) + 1}x{secrets.token_hex(3)}"
        password = password or f"pw {secrets.token_hex(8)}"
        if ":" in name + password or "\n" in name + password:
            raise ValueError("a passwd-file line cannot hold ':' or a newline")
        if name in self.users:
            raise ValueError(f"the account {name!r} exists already")
        self.users[name] = password
        # a passwd-file per account: Dovecot looks at a changed file again at most once a second
        users = self.folder / "users" / name
        users.write_text(f"{name}:{{PLAIN}}{password}::::::\n")
        users.chmod(0o644)
        return name, password

    def client(self, user: str) -> IMAPClient:
        """A signed-in client of ``user`` over plain IMAP (the caller logs out)."""
        client = IMAPClient(self.host, self.port, ssl=False, timeout=30)
        client._imap.debug = 0
        password = self.users[user]
        if password.isascii():
            client.login(user, password)
        else:  # LOGIN is ASCII only
            client.plain_login(user, password)
        return client

    def append(
        self, user: str, folder: str, message: bytes, flags: Sequence[bytes] = (), msg_time: datetime | None = None
    ) -> int:
        """Deliver ``message`` to ``user``'s ``folder`` (made when missing) by APPEND, arrived at ``msg_time``
        (INTERNALDATE; default now); returns its UID."""
        client = self.client(user)
        try:
            if folder.upper() != "INBOX" and not client.folder_exists(folder):
                client.create_folder(folder)
            answer = client.append(folder, message, flags=flags, msg_time=msg_time)
        finally:
            client.logout()
        # "[APPENDUID <uidvalidity> <uid>] Append completed" (RFC 4315 §3)
        return int(answer.split(b"]")[0].split()[-1])

    def maildir(self, user: str, folder: str = "INBOX") -> Path:
        """The maildir of ``user``'s ``folder`` (Maildir++: ``.Sub.Folder`` beside ``cur``)."""
        root = self.folder / "mail" / user
        return root if folder.upper() == "INBOX" else root / f".{folder}"

    def write_maildir(self, user: str, messages: Iterable[bytes], folder: str = "INBOX") -> int:
        """Write ``messages`` straight into ``user``'s maildir (``new/``; Dovecot gives them UIDs when the
        folder is next opened): many thousands in seconds. Returns how many."""
        box = self.maildir(user, folder)
        for sub in ("cur", "new", "tmp"):
            (box / sub).mkdir(parents=True, exist_ok=True)
        uid, gid = _mail_ids()
        count = 0
        stamp = int(time.time())
        for count, message in enumerate(messages, start=1):
            path = box / "new" / f"{stamp}.M{count}P{os.getpid()}.test,S={len(message)}"
            path.write_bytes(message)
        if os.geteuid() == 0:
            for dirpath, dirnames, filenames in os.walk(self.folder / "mail" / user):
                for name in (*dirnames, *filenames):
                    os.chown(os.path.join(dirpath, name), uid, gid)
            os.chown(self.folder / "mail" / user, uid, gid)
        return count

    def doveadm(self, *args: str) -> str:
        """Run ``doveadm`` against this server (``doveadm mailbox update -u ana --uid-validity 7 INBOX``)."""
        out = subprocess.run(
            [DOVEADM, "-c", str(self.conf), *args], capture_output=True, text=True, timeout=120, check=False
        )
        if out.returncode:
            raise RuntimeError(f"doveadm {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    # -- the process ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the server (again) and wait until both ports listen."""
        if self.running:
            return
        log = (self.folder / "dovecot.out").open("ab")
        self.process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.conf)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + 30
        if not (_listening(self.port, deadline) and _listening(self.tls_port, deadline)):
            self.stop()
            missing_server("dovecot", f"it did not listen: {self.log()[-800:]}")

    def stop(self) -> None:
        """Stop the server and every process of it: the mail processes of open connections outlive
        Dovecot's master for a while, so they are ended too (the connections are cut)."""
        process, self.process = self.process, None
        if process is None:
            return
        group = process.pid  # its own session and process group (start_new_session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)

    def close(self) -> None:
        """Stop it and remove its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def log(self) -> str:
        """Dovecot's log so far (and what it wrote to its stdout/stderr)."""
        parts = [
            p.read_text(errors="replace") for p in (self.folder / "dovecot.out", self.folder / "dovecot.log") if p.exists()
        ]
        return "\n".join(parts)

    def __enter__(self) -> Dovecot:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _mail_ids() -> tuple[int, int]:
    """(uid, gid) the mail processes run as: ``nobody`` when root, else this user."""
    if os.geteuid() == 0:
        return pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
    return os.getuid(), os.getgid()


def _listening(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def _config(root: Path, port: int, tls_port: int, cert: Path, key: Path) -> str:
    uid, gid = _mail_ids()
    if os.geteuid() == 0:
        users = "default_login_user = dovenull\ndefault_internal_user = dovecot\n"
        chroots = ""
    else:  # one user for everything; no chroot without root
        me, group = getpass.getuser(), grp.getgrgid(os.getgid()).gr_name
        users = f"default_login_user = {me}\ndefault_internal_user = {me}\ndefault_internal_group = {group}\n"
        chroots = "service anvil {\n  chroot =\n}\nservice imap-login {\n  chroot =\n}\n"
    return f"""# a test server of knowledge's IMAP source tests (tests/helpers/dovecot.py)
protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
instance_name = knowledge-test-{port}
log_path = {root}/dovecot.log
{users}first_valid_uid = 1
first_valid_gid = 1
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
mail_location = maildir:{root}/mail/%u
mail_fsync = never
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {root}/users/%u
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/mail/%u
}}
protocol imap {{
  mail_max_userip_connections = 100
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {tls_port}
    ssl = yes
  }}
}}
{chroots}"""


def start_dovecot() -> Dovecot:
    """A started Dovecot in a new folder of the temp root (removed by :meth:`Dovecot.close`).

    Skips (fails under CI=true) when Debian's Dovecot is not installed or does not start."""
    if not (Path(DOVECOT).exists() and Path(DOVEADM).exists() and Path("/usr/lib/dovecot/imap").exists()):
        missing_server("dovecot", "Debian's Dovecot IMAP server is not installed (apt-get install dovecot-imapd)")
    root = Path(tempfile.mkdtemp(prefix="knowledge-dovecot-"))
    root.chmod(0o755)  # the mail, auth and login processes run as other users when root
    ca, cert, key, _ = _certificates(root)
    mail = root / "mail"
    mail.mkdir()
    if os.geteuid() == 0:
        os.chown(mail, *_mail_ids())
    port, tls_port = free_port(), free_port()
    conf = root / "dovecot.conf"
    conf.write_text(_config(root, port, tls_port, cert, key))
    (root / "users").mkdir(mode=0o755)
    server = Dovecot("127.0.0.1", port, tls_port, ca, root, conf)
    try:
        server.start()
    except BaseException:
        server.close()
        raise
    return server


def make_message(
    subject: str,
    body: str,
    *,
    sender: str = "Ana Lima <ana@example.org>",
    to: str = "team@example.org",
    date: datetime | None = None,
    message_id: str | None = "",
    attachments: Iterable[tuple[str, bytes, str]] = (),
) -> bytes:
    """An RFC 5322 message as a client sends it (CRLF line ends): ``attachments`` are
    ``(file name, bytes, "type/subtype")``; ``message_id`` ``""`` makes one, ``None`` leaves it out;
    ``date`` defaults to 2024-03-05 10:00 UTC."""
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = sender
    msg["To"] = to
    msg["Date"] = format_datetime(date or datetime(2024, 3, 5, 10, 0, tzinfo=UTC))
    if message_id is not None:
        msg["Message-ID"] = message_id or make_msgid(domain="example.org")
    msg.set_content(body)
    for name, data, content_type in attachments:
        maintype, subtype = content_type.split("/", 1)
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes(policy=policy.SMTP)  # the SMTP policy writes CRLF


__all__ = ["DOVEADM", "DOVECOT", "Dovecot", "make_message", "start_dovecot"]
