#!/bin/sh
# A Debian bookworm base image made here, for machines that reach Debian's packages but no image
# registry (this project's CI): debootstrap into a folder, then `docker import`. It stands in for
# python:3.11-slim-bookworm (the Dockerfile's default BASE_IMAGE): Debian's python3 is 3.11 on
# bookworm; python3-venv brings ensurepip; tini is the image's init; wget is the stand-in servers'
# health check (docker/standins/).
#
#   docker/debootstrap-base.sh TAG [MIRROR]     (as root; needs debootstrap and a running dockerd)
set -eu
tag=${1:?usage: $0 TAG [MIRROR]}
mirror=${2:-http://deb.debian.org/debian}
root=$(mktemp -d /var/tmp/knowledge-base.XXXXXX)
trap 'rm -rf "$root"' EXIT INT TERM

debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,tini,wget \
    bookworm "$root" "$mirror"
# What an image needs no copy of: downloaded packages, package lists, manuals, translations.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
tar --numeric-owner -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$tag"
