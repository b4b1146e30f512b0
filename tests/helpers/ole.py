"""OLE Compound Files for tests of embedded objects, written byte by byte ([MS-CFB], [MS-OLEDS])."""

from __future__ import annotations

import struct


def cfb(stream_name: str, payload: bytes) -> bytes:
    """A minimal OLE2 compound file (version 3, 512-byte sectors) with one stream in the root storage;
    the stream is padded to 4096 bytes so it lives in the regular FAT, not the mini stream."""
    payload = payload.ljust(4096, b"\0")
    n = -(-len(payload) // 512)
    end, free, fat_sect, none = 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFD, 0xFFFFFFFF
    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
        + b"\0" * 16
        + struct.pack("<HHHHH6sIIIIIIIII", 0x3E, 3, 0xFFFE, 9, 6, b"\0" * 6, 0, 1, 1, 0, 4096, end, 0, end, 0)
        + struct.pack("<109I", 0, *[free] * 108)
    )
    fat = [fat_sect, end] + [3 + i for i in range(n - 1)] + [end]
    fat_sector = struct.pack(f"<{len(fat)}I", *fat).ljust(512, b"\xff")

    def entry(name: str, kind: int, child: int, start: int, size: int) -> bytes:
        raw = (name + "\0").encode("utf-16-le") if name else b""
        return (
            raw.ljust(64, b"\0")
            + struct.pack("<HBBIII", len(raw), kind, 1, none, none, child)
            + b"\0" * 16
            + b"\0" * 4
            + b"\0" * 16
            + struct.pack("<IQ", start, size)
        )

    directory = (
        entry("Root Entry", 5, 1, end, 0) + entry(stream_name, 2, none, 2, len(payload)) + b"\0" * 128 * 2
    )  # two unused entries fill the sector
    return header + fat_sector + directory + payload


def ole10native(filename: str, data: bytes) -> bytes:
    """The Packager's ``\\x01Ole10Native`` stream carrying ``data`` as ``filename``."""
    path = f"C:\\temp\\{filename}".encode() + b"\0"
    body = (
        struct.pack("<H", 2)
        + filename.encode()
        + b"\0"
        + path
        + b"\0\0\x03\0"
        + struct.pack("<I", len(path))
        + path
        + struct.pack("<I", len(data))
        + data
    )
    return struct.pack("<I", len(body)) + body
