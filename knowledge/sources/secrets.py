"""Credentials kept in the catalog, encrypted: a source's password, token or private key.

:class:`Vault` seals a dict of secret strings into one Fernet token (AES-128-CBC with HMAC-SHA256,
the ``cryptography`` package's recipe) and opens it again. The key comes from the setting
``secret_key`` (the environment's ``KNOWLEDGE_SECRET_KEY``: any passphrase, stretched with scrypt,
n=2**14, r=8, p=1, RFC 7914, over a fixed salt -- the passphrase is the secret); with the embedded
catalog and no such setting, from a random key file ``<data>/secret.key`` made on first use with mode
0600. A shared catalog (``catalog.url``) without ``secret_key`` refuses to keep a secret: its app, API
and worker processes on other machines could never open it.

:func:`redact` takes the secrets out of any text before it is shown, logged, stored or audited.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import quote

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from knowledge.config import Settings
from knowledge.errors import ConfigError

#: The salt of the passphrase's scrypt: fixed, so every process derives the same key.
_SALT = b"knowledge.sources.secrets.v1"
#: What a secret is replaced with in any text a person or a log sees.
MASK = "•••"
_KEYS: dict[str, bytes] = {}
_LOCK = threading.Lock()


def _derive(passphrase: str) -> bytes:
    with _LOCK:
        key = _KEYS.get(passphrase)
        if key is None:
            raw = Scrypt(salt=_SALT, length=32, n=2**14, r=8, p=1).derive(passphrase.encode("utf-8"))
            key = _KEYS[passphrase] = base64.urlsafe_b64encode(raw)
        return key


class Vault:
    """Seals and opens the catalog's secrets with the key of ``settings`` (see the module).

    Raises (from :meth:`seal` and :meth:`open`):
        ConfigError: no key can be had (a shared catalog without ``secret_key``), or the key is not
            the one the secret was sealed with (``secret_key`` changed: the words say so).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._fernet: Fernet | None = None

    @property
    def key_file(self) -> Path:
        """The key file of the embedded catalog: ``<data>/secret.key``."""
        return self.settings.data_root / "secret.key"

    def _key(self) -> Fernet:
        if self._fernet is not None:
            return self._fernet
        secret = self.settings.secret_key
        if secret is not None and secret.get_secret_value().strip():
            self._fernet = Fernet(_derive(secret.get_secret_value().strip()))
            return self._fernet
        if self.settings.catalog.url:
            raise ConfigError(
                "Credentials are kept encrypted with a key every process of a shared catalog must share:"
                " set KNOWLEDGE_SECRET_KEY (any long passphrase) for the app, the API and every worker."
            )
        path = self.key_file
        with _LOCK:
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(Fernet.generate_key())
            self._fernet = Fernet(path.read_bytes().strip())
        return self._fernet

    def seal(self, values: Mapping[str, str]) -> str | None:
        """``values`` as one token (``None`` for none)."""
        kept = {k: v for k, v in values.items() if v not in (None, "")}
        if not kept:
            return None
        return self._key().encrypt(json.dumps(kept).encode("utf-8")).decode("ascii")

    def open(self, token: str | None) -> dict[str, str]:
        """The values sealed in ``token`` (``{}`` for none)."""
        if not token:
            return {}
        try:
            return dict(json.loads(self._key().decrypt(token.encode("ascii"))))
        except InvalidToken:
            raise ConfigError(
                "The saved credentials cannot be opened with this key: KNOWLEDGE_SECRET_KEY (or"
                " data/secret.key) is not the one they were saved with. Set it back, or type the"
                " credentials again."
            ) from None


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its URL-encoded form) replaced by :data:`MASK`; secrets
    shorter than 3 characters are left (they would mask ordinary words)."""
    for s in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        for form in {s, quote(s, safe=""), quote(s)}:
            text = text.replace(form, MASK)
    return text


__all__ = ["MASK", "Vault", "redact"]
