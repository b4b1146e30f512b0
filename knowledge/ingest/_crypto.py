"""Encrypted Office documents ([MS-OFFCRYPTO]: an OLE2 file holding ``EncryptionInfo`` and an
``EncryptedPackage`` stream), decrypted with msoffcrypto-tool into the .docx/.xlsx/.pptx they hold;
encrypted OpenDocument packages (ODF 1.2 part 3 §3.8), decrypted member by member with
``cryptography`` (no maintained Python package does it: odfpy does not, odf-decrypt is not on PyPI's
mirror here)."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
import zlib

import msoffcrypto
from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from lxml import etree

try:  # CFB moved among the "decrepit" ciphers in cryptography 47
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
except ImportError:  # pragma: no cover - cryptography 44-46
    from cryptography.hazmat.primitives.ciphers.modes import CFB
from msoffcrypto.exceptions import DecryptionError, FileFormatError, InvalidKeyError

from knowledge.errors import PasswordRequired, UnsupportedFile

#: lxml parsing without entities, DTDs or network access.
_SAFE_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)

#: The password Excel applies when a workbook is "protected" without a password to open it
#: ([MS-OFFCRYPTO] §2.3.7.7 and Apache POI's ``Decryptor.DEFAULT_PASSWORD``); tried first, silently.
DEFAULT_PASSWORD = "VelvetSweatshop"


def decrypt_ooxml(data: bytes, password: str | None) -> bytes:
    """The decrypted package (a ZIP) of the encrypted Office document ``data``.

    Excel's built-in default password is tried first, then ``password``.

    Raises:
        PasswordRequired: no password given (``"password required: ..."``), or it is wrong
            (``"wrong password: ..."``).
        UnsupportedFile: the encryption is damaged or of a kind msoffcrypto-tool does not read.
    """
    for candidate in (DEFAULT_PASSWORD, password):
        if candidate is None:
            continue
        try:
            office = msoffcrypto.OfficeFile(io.BytesIO(data))
            office.load_key(password=candidate)
            out = io.BytesIO()
            office.decrypt(out)
        except (InvalidKeyError, DecryptionError):
            continue
        except (FileFormatError, ValueError, KeyError, OSError, AssertionError, NotImplementedError) as exc:
            raise UnsupportedFile(f"damaged: the encrypted Office document cannot be read ({exc})") from exc
        return out.getvalue()
    if password is None:
        raise PasswordRequired("password required: this Office document is encrypted; give its password to read it")
    raise PasswordRequired("wrong password: the password given does not open this Office document")


# -- OpenDocument (ODF 1.2 part 3 §3.8 "Encryption"; the ODF 1.0/1.1 Blowfish form) -----------------

_MANIFEST_NS = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
_M = "{" + _MANIFEST_NS + "}"
#: Ciphers by their manifest name -> (cipher, mode, block size in bytes or 0 for a stream mode).
_AES_CBC = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
_BLOWFISH = "blowfish cfb"
_SHA256 = {"http://www.w3.org/2000/09/xmldsig#sha256", "http://www.w3.org/2001/04/xmlenc#sha256", "sha256"}


def odf_encrypted(data: bytes) -> bool:
    """Whether the OpenDocument package ``data`` has encrypted members (``manifest:encryption-data``
    in ``META-INF/manifest.xml``). ``False`` for a package that cannot be opened."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            info = zf.getinfo("META-INF/manifest.xml")
            return info.file_size < 4_000_000 and b"encryption-data" in zf.read(info)
    except (KeyError, zipfile.BadZipFile, ValueError, OSError, EOFError, RuntimeError, NotImplementedError):
        return False


def decrypt_odf(data: bytes, password: str | None) -> bytes:
    """The package of the encrypted OpenDocument file ``data`` with its members decrypted (and the
    manifest's encryption data removed), ready for the OpenDocument reader.

    Each encrypted member: start key = SHA-256 (or SHA-1) of the password's UTF-8 bytes; key =
    PBKDF2-HMAC-SHA1(start key, salt, iterations, key size); AES-256-CBC with W3C padding, or
    Blowfish CFB (OpenOffice 1.x-3.x); the result is raw deflate. The password is checked against
    the manifest's checksum of the first 1024 decrypted bytes (``sha256-1k`` or ``SHA1/1K``).

    Raises:
        PasswordRequired: no password (``"password required: ..."``), or the checksum says it is
            wrong (``"wrong password: ..."``).
        UnsupportedFile: the manifest or a member is damaged, or the encryption is of a kind not
            read here (for example LibreOffice 24.2's AES-GCM with Argon2id), named in the message.
    """
    if password is None:
        raise PasswordRequired("password required: this OpenDocument file is encrypted; give its password to read it")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        manifest = etree.fromstring(zf.read("META-INF/manifest.xml"), _SAFE_XML)
    except (KeyError, zipfile.BadZipFile, ValueError, OSError, EOFError, etree.XMLSyntaxError) as exc:
        raise UnsupportedFile(f"damaged: the encrypted OpenDocument file cannot be read ({exc})") from exc
    entries = {e.get(_M + "full-path"): e.find(_M + "encryption-data") for e in manifest.iter(_M + "file-entry")}
    out = io.BytesIO()
    with zf, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as new:
        for info in zf.infolist():
            body = zf.read(info)
            enc = entries.get(info.filename)
            if info.filename == "META-INF/manifest.xml":
                for node in manifest.iter(_M + "encryption-data"):
                    node.getparent().remove(node)
                body = etree.tostring(manifest, xml_declaration=True, encoding="UTF-8")
            elif enc is not None:
                body = _decrypt_member(body, enc, password, info.filename)
            method = zipfile.ZIP_STORED if info.filename == "mimetype" else zipfile.ZIP_DEFLATED
            new.writestr(zipfile.ZipInfo(info.filename, info.date_time), body, compress_type=method)
    return out.getvalue()


def _decrypt_member(body: bytes, enc, password: str, name: str) -> bytes:
    algorithm = enc.find(_M + "algorithm")
    derivation = enc.find(_M + "key-derivation")
    start = enc.find(_M + "start-key-generation")
    if algorithm is None or derivation is None:
        raise UnsupportedFile(f"damaged: the manifest's encryption data for {name} is incomplete")
    cipher_name = (algorithm.get(_M + "algorithm-name") or "").strip()
    kdf_name = (derivation.get(_M + "key-derivation-name") or "").strip()
    if kdf_name != "PBKDF2" or cipher_name.lower() not in (_AES_CBC, _BLOWFISH):
        raise UnsupportedFile(
            f"unsupported: OpenDocument encryption {cipher_name or '?'} with {kdf_name or '?'}"
            " — save it without a password (or in LibreOffice's ODF 1.2 format) to add it"
        )
    try:
        iv = base64.b64decode(algorithm.get(_M + "initialisation-vector") or "")
        salt = base64.b64decode(derivation.get(_M + "salt") or "")
        iterations = int(derivation.get(_M + "iteration-count") or "1024")
        key_size = int(derivation.get(_M + "key-size") or ("32" if cipher_name == _AES_CBC else "16"))
        checksum = base64.b64decode(enc.get(_M + "checksum") or "")
    except (ValueError, TypeError) as exc:
        raise UnsupportedFile(f"damaged: the manifest's encryption data for {name} cannot be read") from exc
    start_name = (start.get(_M + "start-key-generation-name") or "SHA1").strip().lower() if start is not None else "sha1"
    digest = hashlib.sha256 if start_name in _SHA256 else hashlib.sha1
    start_key = digest(password.encode("utf-8")).digest()
    key = hashlib.pbkdf2_hmac("sha1", start_key, salt, iterations, key_size)
    if cipher_name == _AES_CBC:
        decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    else:
        decryptor = Cipher(Blowfish(key), CFB(iv)).decryptor()
    try:
        plain = decryptor.update(body) + decryptor.finalize()
    except ValueError as exc:  # not a whole number of blocks
        raise UnsupportedFile(f"damaged: the encrypted member {name} is cut short") from exc
    unpadded = plain[: -plain[-1]] if cipher_name == _AES_CBC and plain and 1 <= plain[-1] <= 16 else plain
    check_type = (enc.get(_M + "checksum-type") or "").lower()
    check = hashlib.sha256 if "sha256" in check_type else hashlib.sha1
    if checksum and checksum not in (check(unpadded[:1024]).digest(), check(plain[:1024]).digest()):
        raise PasswordRequired("wrong password: the password given does not open this OpenDocument file")
    try:
        return zlib.decompressobj(-15).decompress(unpadded)
    except zlib.error as exc:
        if not checksum:
            raise PasswordRequired("wrong password: the password given does not open this OpenDocument file") from exc
        raise UnsupportedFile(f"damaged: the encrypted member {name} cannot be inflated") from exc
