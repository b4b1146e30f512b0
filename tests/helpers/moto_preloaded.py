"""``moto_server`` with a bucket of many keys made before it listens, in its own process (100,000 keys
take seconds this way, minutes as 100,000 PutObject requests):

    python tests/helpers/moto_preloaded.py BUCKET PREFIX COUNT [moto_server's arguments]

The keys are ``PREFIX<i % 97:02>/<i:06>.txt`` for ``i`` below ``COUNT``, empty, in region us-east-1.
This reaches into moto's in-memory S3 backend (``moto.s3.models.s3_backends``, moto 5); what is then
served is moto's server mode as ever. See :func:`tests.helpers.s3.moto_server` (``preload=``)."""

from __future__ import annotations

import sys


def preloaded_key(prefix: str, i: int) -> str:
    """The ``i``-th preloaded key under ``prefix``."""
    return f"{prefix}{i % 97:02}/{i:06}.txt"


def main(argv: list[str]) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import main as serve

    bucket, prefix, count, *rest = argv
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(bucket, "us-east-1")
    for i in range(int(count)):
        backend.put_object(bucket, preloaded_key(prefix, i), b"")
    serve(rest)


if __name__ == "__main__":
    main(sys.argv[1:])
