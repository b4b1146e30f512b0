"""Encrypted Office documents ([MS-OFFCRYPTO]: an OLE2 file holding ``EncryptionInfo`` and an
``EncryptedPackage`` stream), decrypted with msoffcrypto-tool into the .docx/.xlsx/.pptx they hold."""

from __future__ import annotations

import io

import msoffcrypto
from msoffcrypto.exceptions import DecryptionError, FileFormatError, InvalidKeyError

from knowledge.errors import PasswordRequired, UnsupportedFile

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
        raise PasswordRequired("password required: this Office document is encrypted; give its password"
                               " to read it")
    raise PasswordRequired("wrong password: the password given does not open this Office document")
