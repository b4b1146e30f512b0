"""``knowledge-container init``: what a new stack needs once before its first process starts, run by
compose.yaml's one-off ``init`` service. Today that is the bucket: with ``file_store.backend = "s3"``
the file store needs ``file_store.s3_bucket`` to exist, and an object store fresh from its image has
none. The bucket is made when missing, with the file store's own client settings; an existing one is
left as it is. It waits for the endpoint to answer (up to ``--wait`` seconds, default 120).

Exit status: 0 done (or nothing to do), 1 the endpoint did not answer in time or refused."""

from __future__ import annotations

import argparse
import sys
import time

from botocore import exceptions as bce

from knowledge.config import load_settings
from knowledge.errors import KnowledgeError
from knowledge.filestore.s3 import client_config, error_code, make_client


def make_bucket(wait: float) -> int:
    try:
        settings = load_settings()
    except KnowledgeError as exc:
        print(f"init: {exc}", file=sys.stderr)
        return 1
    fs = settings.file_store
    if fs.backend != "s3":
        print(f"init: the file store is {fs.backend!r}: no bucket to make")
        return 0
    bucket = (fs.s3_bucket or "").strip()
    where = f"bucket {bucket!r} at {fs.s3_endpoint_url or 'AWS S3'}"
    client = make_client(
        fs.s3_access_key_id.get_secret_value() if fs.s3_access_key_id else None,
        fs.s3_secret_access_key.get_secret_value() if fs.s3_secret_access_key else None,
        region=fs.s3_region or None,
        endpoint_url=fs.s3_endpoint_url or None,
        config=client_config(connect_timeout=5, read_timeout=30, path_style=True if fs.s3_endpoint_url else None),
    )
    deadline = time.monotonic() + wait
    while True:
        try:
            client.head_bucket(Bucket=bucket)
            print(f"init: {where} exists")
            return 0
        except bce.ClientError as exc:
            if error_code(exc) not in ("404", "NoSuchBucket", "NotFound"):
                reason = f"{error_code(exc)}: {exc}"
            else:
                try:
                    client.create_bucket(Bucket=bucket)
                except bce.ClientError as made:
                    if error_code(made) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        print(f"init: cannot make {where}: {made}", file=sys.stderr)
                        return 1
                print(f"init: made {where}")
                return 0
        except bce.BotoCoreError as exc:  # the endpoint does not answer (yet)
            reason = str(exc)
        if time.monotonic() > deadline:
            print(f"init: {where} did not answer within {wait:g} s: {reason}", file=sys.stderr)
            return 1
        time.sleep(2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="knowledge-container init", description=__doc__.split("\n\n")[0])
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the endpoint (default 120)")
    return make_bucket(parser.parse_args(argv).wait)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
