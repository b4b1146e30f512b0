"""A real OpenLDAP server for the LDAP sign-in tests: Debian's ``slapd`` on free loopback ports, its
own ``slapd.conf`` and an mdb database in a temp folder, loaded with :data:`PEOPLE` and their groups
(``groupOfNames``, passwords stored as ``{SSHA}`` made by ``slappasswd``); plain LDAP (StartTLS
offered) and LDAPS, with a server certificate for ``127.0.0.1``/``localhost`` signed by a CA the
test makes (``ca_file``), and another CA that signed nothing (``stranger_ca_file``); LDAPS on 127.0.0.2 too, an
address the certificate does not name.

Under CI=true a ``slapd`` that cannot start fails the test (:func:`tests.helpers.env.missing_server`).
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.helpers.api import free_port
from tests.helpers.env import missing_server

SLAPD, SLAPADD, SLAPPASSWD = "/usr/sbin/slapd", "/usr/sbin/slapadd", "/usr/sbin/slappasswd"
BASE = "dc=example,dc=org"
ADMIN_DN, ADMIN_PW = f"cn=admin,{BASE}", "directory admin secret"
#: uid -> (password, cn, mail).
PEOPLE = {
    "ana": ("ana directory pw", "Ana Lima", "ana@example.org"),
    "bo": ("bo directory pw", "Bo Berg", "bo@example.org"),
    "svc": ("service account pw", "Search Service", "svc@example.org"),
}
#: group cn -> member uids.
GROUPS = {"hr": ["ana"], "staff": ["ana", "bo"], "engineering": ["bo"]}


@dataclass
class Slapd:
    """A running slapd: ``url`` (ldap://), ``ldaps_url``, the CA files, its folder; :meth:`modify` runs ``ldapmodify``."""

    url: str
    ldaps_url: str
    #: LDAPS on 127.0.0.2, an address the server's certificate does not name.
    ldaps_other_name_url: str
    ca_file: Path
    stranger_ca_file: Path
    folder: Path
    process: subprocess.Popen

    def modify(self, ldif: str) -> None:
        """Apply ``ldif`` (changetype records) as the directory's admin."""
        subprocess.run(
            ["ldapmodify", "-x", "-H", self.url, "-D", ADMIN_DN, "-w", ADMIN_PW],
            input=ldif.encode(),
            check=True,
            capture_output=True,
            timeout=30,
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def _certificates(folder: Path) -> tuple[Path, Path, Path, Path]:
    """(ca.pem, server.pem, server.key, stranger-ca.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)

    def ca(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(hours=1))
            .not_valid_after(now + timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return key, cert

    ca_key, ca_cert = ca("knowledge test LDAP CA")
    _, stranger = ca("a CA nobody asked")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "stranger-ca.pem"
    paths[0].write_bytes(ca_cert.public_bytes(pem))
    paths[1].write_bytes(cert.public_bytes(pem))
    paths[2].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    paths[3].write_bytes(stranger.public_bytes(pem))
    return paths


def _ssha(password: str) -> str:
    out = subprocess.run(
        [SLAPPASSWD, "-h", "{SSHA}", "-s", password], check=True, capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip()


def _ldif() -> str:
    entries = [
        f"dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n",
        f"dn: ou=people,{BASE}\nobjectClass: organizationalUnit\nou: people\n",
        f"dn: ou=groups,{BASE}\nobjectClass: organizationalUnit\nou: groups\n",
    ]
    for uid, (pw, cn, mail) in PEOPLE.items():
        entries.append(
            f"dn: uid={uid},ou=people,{BASE}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {cn}\n"
            f"sn: {cn.split()[-1]}\nmail: {mail}\nuserPassword: {_ssha(pw)}\n"
        )
    for cn, members in GROUPS.items():
        lines = "".join(f"member: uid={m},ou=people,{BASE}\n" for m in members)
        entries.append(f"dn: cn={cn},ou=groups,{BASE}\nobjectClass: groupOfNames\ncn: {cn}\n{lines}")
    return "\n".join(entries)


def _listening(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def start_slapd(folder: Path, schema: str = "") -> Slapd:
    """Start slapd in ``folder`` (made by the caller, e.g. ``tmp_path_factory.mktemp``); ``schema``:
    more schema text (``attributetype``/``objectclass`` lines) loaded after Debian's.

    Skips (fails under CI=true) when Debian's slapd is not installed or does not start."""
    if not (Path(SLAPD).exists() and Path(SLAPADD).exists() and shutil.which("ldapmodify")):
        missing_server("slapd", "Debian's slapd and ldap-utils are not installed (apt-get install slapd ldap-utils)")
    ca, cert, key, stranger = _certificates(folder)
    db = folder / "db"
    db.mkdir()
    conf = folder / "slapd.conf"
    extra = ""
    if schema:
        (folder / "extra.schema").write_text(schema)
        extra = f"include {folder / 'extra.schema'}\n"
    conf.write_text(
        "".join(f"include /etc/ldap/schema/{s}.schema\n" for s in ("core", "cosine", "inetorgperson", "nis"))
        + extra
        + "modulepath /usr/lib/ldap\nmoduleload back_mdb\n"
        + f"pidfile {folder / 'slapd.pid'}\nargsfile {folder / 'slapd.args'}\n"
        + f"TLSCACertificateFile {ca}\nTLSCertificateFile {cert}\nTLSCertificateKeyFile {key}\n"
        + f'database mdb\nmaxsize 16777216\nsuffix "{BASE}"\nrootdn "{ADMIN_DN}"\nrootpw {_ssha(ADMIN_PW)}\n'
        + f"directory {db}\n"
        + "access to attrs=userPassword by self write by anonymous auth by * none\n"
        + "access to * by * read\n"
    )
    data = folder / "data.ldif"
    data.write_text(_ldif())
    load = subprocess.run([SLAPADD, "-f", str(conf), "-l", str(data)], capture_output=True, text=True, timeout=60)
    if load.returncode:
        missing_server("slapd", f"slapadd failed: {load.stderr.strip()[-500:]}")
    port, tls_port, other_port = free_port(), free_port(), free_port()
    url, ldaps_url = f"ldap://127.0.0.1:{port}", f"ldaps://127.0.0.1:{tls_port}"
    other_url = f"ldaps://127.0.0.2:{other_port}"
    log = (folder / "slapd.log").open("wb")
    process = subprocess.Popen(
        [SLAPD, "-f", str(conf), "-h", f"{url}/ {ldaps_url}/ {other_url}/", "-d", "0"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    if not (_listening(port, deadline) and _listening(tls_port, deadline)):
        process.kill()
        process.wait(timeout=10)
        missing_server("slapd", f"it did not listen: {(folder / 'slapd.log').read_text(errors='replace')[-500:]}")
    return Slapd(url, ldaps_url, other_url, ca, stranger, folder, process)


__all__ = ["ADMIN_DN", "ADMIN_PW", "BASE", "GROUPS", "PEOPLE", "Slapd", "start_slapd"]
