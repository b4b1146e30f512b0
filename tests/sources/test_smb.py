"""The SMB source (knowledge/sources/smb.py) and the SID mapping (knowledge/sources/sids.py) against a
real Samba server (tests/helpers/samba.py) and, for the directory lookup, a real slapd
(tests/helpers/ldap.py). Each test works in a folder of its own on the module's server; the fault tests
that stop the server start one of their own."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from knowledge.config import Settings, load_settings
from knowledge.errors import ConfigError, InvalidArgument
from knowledge.sources.base import (
    Entry,
    EntryGone,
    SourceAuthFailed,
    SourceContext,
    SourceNotFound,
    SourceUnavailable,
)
from knowledge.sources.sids import binary_filter_value, sid_mapper, username_attribute
from knowledge.sources.smb import (
    Ace,
    SmbSource,
    parse_dacl,
    readers_from_aces,
    readers_from_security_descriptor,
    sid_bytes,
    sid_text,
)
from tests.helpers.samba import (
    AUTHENTICATED_USERS,
    GROUP,
    SERVICE_USER,
    USERS,
    Samba,
    sddl_to_binary,
    start_samba,
)

SECRET = USERS[SERVICE_USER]


@pytest.fixture(scope="module")
def samba(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Samba]:
    """The module's Samba server (tests use folders of their own on its share)."""
    server = start_samba(tmp_path_factory.mktemp("samba"))
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def own_samba(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Samba]:
    """A server of this test's own, which it may stop."""
    server = start_samba(tmp_path_factory.mktemp("own-samba"))
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def folder(request: pytest.FixtureRequest) -> str:
    """This test's folder on the module's share."""
    return "t_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:60]


def names_of(samba: Samba) -> dict[str, str]:
    return {samba.sids["kn_ana"]: "user:ana", samba.sids["kn_bo"]: "user:bo", samba.sids[GROUP]: "group:hr"}


def source(samba: Samba, principal_for_sid: object = None, timeout: float = 10.0, **config: object) -> SmbSource:
    mapper = principal_for_sid or names_of(samba).get
    context = SourceContext(settings=Settings(), principal_for_sid=mapper, timeout=timeout)  # type: ignore[arg-type]
    return SmbSource(samba.config(**config), context)


def listing(src: SmbSource) -> dict[str, Entry]:
    with src:
        return {e.path: e for e in src.entries()}


def read(src: SmbSource, entry: Entry) -> bytes:
    out = io.BytesIO()
    src.fetch(entry, out)
    return out.getvalue()


# -- listing and reading ------------------------------------------------------------------------------


def test_lists_every_file_of_the_folder_with_size_version_url_and_no_bytes_read(samba: Samba, folder: str) -> None:
    samba.write(f"{folder}/a.txt", "alpha")
    samba.write(f"{folder}/sub/b.md", "# bravo\n")
    samba.write(f"{folder}/sub/deeper/c d.txt", "charlie with a space")
    samba.write(f"{folder}/.hidden.txt", "a dot-file: Samba marks it hidden")
    samba.write(f"{folder}/empty.txt", b"")
    samba.write(f"{folder}/caf\u00e9.txt", "a name beyond ASCII")

    entries = listing(source(samba, path=folder))

    assert sorted(entries) == ["a.txt", "caf\u00e9.txt", "empty.txt", "sub/b.md", "sub/deeper/c d.txt"]
    a = entries["a.txt"]
    assert a.size == 5 and entries["empty.txt"].size == 0
    assert a.url == f"smb://127.0.0.1:{samba.port}/docs/{folder}/a.txt"
    assert entries["sub/deeper/c d.txt"].url.endswith(f"/docs/{folder}/sub/deeper/c%20d.txt")
    assert SECRET not in a.url and SERVICE_USER not in a.url
    assert a.version.startswith("5-") and a.content_key
    assert datetime.fromisoformat(a.attributes["modified"]).tzinfo is not None
    assert len({e.content_key for e in entries.values()}) == len(entries)

    flat = listing(source(samba, path=folder, recursive=False))
    assert sorted(flat) == ["a.txt", "caf\u00e9.txt", "empty.txt"]
    with_hidden = listing(source(samba, path=folder, include_hidden=True))
    assert ".hidden.txt" in with_hidden
    # Backslashes and stray slashes in the folder mean the same folder.
    assert sorted(listing(source(samba, path=f"\\{folder}\\sub\\"))) == ["b.md", "deeper/c d.txt"]


def test_the_whole_share_is_listed_when_no_folder_is_given(samba: Samba, folder: str) -> None:
    samba.write(f"{folder}/x.txt", "x")
    assert f"{folder}/x.txt" in listing(source(samba))


def test_fetch_writes_the_files_bytes(samba: Samba, folder: str) -> None:
    big = os.urandom(3 * 1024 * 1024 + 17)  # several READs
    samba.write(f"{folder}/big.bin", big)
    samba.write(f"{folder}/small.txt", "small")
    samba.write(f"{folder}/empty.txt", b"")
    src = source(samba, path=folder)
    with src:
        entries = {e.path: e for e in src.entries()}
        assert read(src, entries["big.bin"]) == big
        assert read(src, entries["small.txt"]) == b"small"
        assert read(src, entries["empty.txt"]) == b""
    # A fresh source (a new run) fetches without listing first.
    with source(samba, path=folder) as again:
        assert read(again, entries["small.txt"]) == b"small"


def test_version_changes_on_edit_and_the_content_key_follows_a_rename(samba: Samba, folder: str) -> None:
    samba.write(f"{folder}/doc.txt", "first text")
    samba.write(f"{folder}/other.txt", "other")
    before = listing(source(samba, path=folder))
    assert listing(source(samba, path=folder)) == before  # nothing changed, nothing differs

    samba.write(f"{folder}/doc.txt", "first TEXT")  # same size
    edited = listing(source(samba, path=folder))
    assert edited["doc.txt"].version != before["doc.txt"].version
    assert edited["doc.txt"].content_key != before["doc.txt"].content_key
    assert edited["other.txt"] == before["other.txt"]

    os.rename(samba.root / folder / "doc.txt", samba.root / folder / "renamed.txt")
    (samba.root / folder / "box").mkdir()
    os.rename(samba.root / folder / "other.txt", samba.root / folder / "box" / "other.txt")
    moved = listing(source(samba, path=folder))
    assert sorted(moved) == ["box/other.txt", "renamed.txt"]
    assert moved["renamed.txt"].content_key == edited["doc.txt"].content_key
    assert moved["box/other.txt"].content_key == before["other.txt"].content_key


def test_check_reaches_the_folder_and_counts_its_first_level(samba: Samba, folder: str) -> None:
    samba.write(f"{folder}/a.txt", "a")
    samba.write(f"{folder}/sub/b.txt", "b")
    with source(samba, path=folder) as src:
        assert src.check() == "reached; 1 file and 1 folder at the first level"
    assert source(samba, path=folder).location() == f"smb://127.0.0.1:{samba.port}/docs/{folder}"


def test_encrypted_sessions_read_the_same_files(samba: Samba, folder: str) -> None:
    samba.write(f"{folder}/secret.txt", "sealed on the wire")
    src = source(samba, path=folder, encrypt=True)
    with src:
        (entry,) = src.entries()
        assert read(src, entry) == b"sealed on the wire"
        assert src._session.encrypt_data  # SMB 3 encryption was negotiated


def test_settings_that_cannot_work_are_refused_in_words(samba: Samba) -> None:
    context = SourceContext(settings=Settings())
    with pytest.raises(InvalidArgument, match="share is one name"):
        SmbSource(samba.config(share="docs/sub"), context)
    with pytest.raises(InvalidArgument, match="'\\.\\.'"):
        SmbSource(samba.config(path="a/../../etc"), context)
    with pytest.raises(InvalidArgument, match="port"):
        SmbSource(samba.config(port=70000), context)
    with pytest.raises(InvalidArgument, match="password"):
        SmbSource(samba.config(password=""), context)


# -- permissions ------------------------------------------------------------------------------------


def test_readers_follow_the_ntfs_acls(samba: Samba, folder: str) -> None:
    ana, bo, hr, svc = samba.sids["kn_ana"], samba.sids["kn_bo"], samba.sids[GROUP], samba.sids[SERVICE_USER]
    files = {
        "ana-only.txt": f"D:P(A;;FR;;;{ana})",
        "hr.txt": f"D:P(A;;0x001200a9;;;{hr})",
        "everyone.txt": "D:P(A;;FR;;;WD)",
        "authenticated.txt": "D:P(A;;FA;;;AU)",
        "generic-all.txt": f"D:P(A;;GA;;;{bo})(A;;FR;;;{ana})",
        "write-only.txt": f"D:P(A;;FW;;;{bo})(A;;FR;;;{ana})",
        "unknown-sid.txt": "D:P(A;;FR;;;S-1-5-21-1-2-3-4242)",
        "service-only.txt": f"D:P(A;;FA;;;{svc})",
        "deny-bo-in-hr.txt": f"D:P(D;;FR;;;{bo})(A;;FR;;;{hr})(A;;FR;;;{ana})",
        "deny-everyone.txt": f"D:P(D;;FR;;;WD)(A;;FR;;;{ana})",
        "everyone-but-guests.txt": "D:P(D;;FR;;;BG)(A;;FR;;;WD)",
        "inherit-only.txt": f"D:P(A;OICIIO;FR;;;{bo})(A;;FR;;;{ana})",
    }
    for name in files:
        samba.write(f"{folder}/{name}", f"text of {name}")
    for name, dacl in files.items():
        samba.set_acl(f"{folder}/{name}", dacl)
    samba.write(f"{folder}/no-acl-set.txt", "its mode says others may read")

    entries = listing(source(samba, path=folder))
    readers = {path: e.readers for path, e in entries.items()}

    assert readers == {
        "ana-only.txt": ("user:ana",),
        "hr.txt": ("group:hr",),
        "everyone.txt": None,
        "authenticated.txt": None,
        "generic-all.txt": ("user:ana", "user:bo"),
        "write-only.txt": ("user:ana",),
        "unknown-sid.txt": (),
        "service-only.txt": (),
        "deny-bo-in-hr.txt": ("user:ana",),  # the group's grant is dropped: bo is in it for all we know
        "deny-everyone.txt": (),
        "everyone-but-guests.txt": None,
        "inherit-only.txt": ("user:ana",),
        "no-acl-set.txt": None,  # Samba shows the POSIX mode: Everyone may read
    }
    # The ACLs the tests set are the ones Samba enforces.
    assert samba.read_as("kn_ana", f"{folder}/ana-only.txt") == b"text of ana-only.txt"
    assert samba.read_as("kn_ana", f"{folder}/hr.txt") == b"text of hr.txt"
    with pytest.raises(PermissionError):
        samba.read_as("kn_bo", f"{folder}/ana-only.txt")
    with pytest.raises(PermissionError):
        samba.read_as("kn_bo", f"{folder}/hr.txt")


def test_a_changed_acl_changes_the_readers_and_unknown_sids_are_logged(
    samba: Samba, folder: str, caplog: pytest.LogCaptureFixture
) -> None:
    ana, hr = samba.sids["kn_ana"], samba.sids[GROUP]
    samba.write(f"{folder}/memo.txt", "memo")
    samba.set_acl(f"{folder}/memo.txt", f"D:P(A;;FR;;;{ana})")
    first = listing(source(samba, path=folder))["memo.txt"]
    samba.set_acl(f"{folder}/memo.txt", f"D:P(A;;FR;;;{hr})(A;;FR;;;S-1-5-21-9-9-9-1234)")
    samba.write(f"{folder}/memo2.txt", "memo 2")
    samba.set_acl(f"{folder}/memo2.txt", "D:P(A;;FR;;;S-1-5-21-9-9-9-1234)")
    with caplog.at_level(logging.DEBUG, logger="knowledge.sources.smb"):
        entries = listing(source(samba, path=folder))
    second = entries["memo.txt"]
    assert (first.readers, second.readers, entries["memo2.txt"].readers) == (("user:ana",), ("group:hr",), ())
    assert first.content_key == second.content_key  # the bytes did not change
    said = [r.getMessage() for r in caplog.records if "S-1-5-21-9-9-9-1234" in r.getMessage()]
    assert len(said) == 1 and "grants nobody" in said[0]  # once, not once per file


def test_files_inherit_the_acl_of_their_folder(samba: Samba, folder: str) -> None:
    ana = samba.sids["kn_ana"]
    samba.write(f"{folder}/keep.txt", "placeholder")
    (samba.root / folder / "private").mkdir()
    samba.set_acl(f"{folder}/private", f"D:P(A;OICI;FA;;;{samba.sids[SERVICE_USER]})(A;OICI;FR;;;{ana})")
    # A file created over SMB in the folder inherits its ACEs (as on Windows).
    with samba.smb_session() as (_conn, _session, tree):
        from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask, ImpersonationLevel, Open, ShareAccess

        handle = Open(tree, f"{folder}\\private\\new.txt")
        handle.create(
            ImpersonationLevel.Impersonation,
            FilePipePrinterAccessMask.GENERIC_WRITE,
            0,
            ShareAccess.FILE_SHARE_READ,
            CreateDisposition.FILE_CREATE,
            0x40,
        )
        handle.write(b"inherited", 0)
        handle.close()
    entries = listing(source(samba, path=folder))
    assert entries["private/new.txt"].readers == ("user:ana",)


def test_readers_rules_on_descriptors_samba_encodes() -> None:
    """The rules of readers_from_aces, on descriptors made by Samba's own SDDL encoder."""
    ana, bo, hr = "S-1-5-21-1-2-3-1001", "S-1-5-21-1-2-3-1002", "S-1-5-21-1-2-3-2001"
    names = {ana: "user:ana", bo: "user:bo", hr: "group:hr"}

    def readers(sddl: str) -> tuple[str, ...] | None:
        return readers_from_security_descriptor(sddl_to_binary(sddl), names.get)

    assert readers(f"O:{ana}G:{ana}D:P(A;;FR;;;{ana})") == ("user:ana",)
    assert readers(f"D:(A;;GR;;;{bo})(A;;FR;;;{hr})") == ("group:hr", "user:bo")
    assert readers(f"D:(A;;0x1;;;{bo})") == ("user:bo",)  # FILE_READ_DATA alone
    assert readers(f"D:(A;;0x00120080;;;{bo})") == ()  # attributes and READ_CONTROL: not the bytes
    assert readers(f"D:(A;;FR;;;{ana})(A;;FR;;;WD)") is None
    assert readers(f"D:(A;;FR;;;{ana})(A;;FR;;;{AUTHENTICATED_USERS})") is None
    assert readers(f"D:(D;;FR;;;{AUTHENTICATED_USERS})(A;;FR;;;{ana})") == ()
    assert readers(f"D:(D;;FR;;;{ana})(A;;FR;;;{ana})(A;;FR;;;{bo})") == ("user:bo",)
    assert readers(f"D:(D;;FR;;;{hr})(A;;FR;;;WD)(A;;FR;;;{ana})") == ("user:ana",)  # not "everyone but hr"
    assert readers(f"D:(D;;FW;;;{bo})(A;;FR;;;{hr})") == ("group:hr",)  # a write-deny takes no reading
    assert readers("D:(D;;FR;;;AN)(A;;FR;;;WD)") is None  # a deny of Anonymous Logon takes from nobody
    assert readers("D:(D;;FR;;;S-1-5-21-1-2-3-501)(A;;FR;;;WD)") is None  # the domain's Guest
    assert readers(f"D:(A;CIOI;FR;;;{ana})") == ("user:ana",)  # inheritable, and for the file itself
    assert readers(f"D:(A;CIOIIO;FR;;;{ana})") == ()  # for children only
    assert readers("D:") == ()  # an empty DACL: nobody
    assert readers(f"O:{ana}G:{ana}") is None  # no DACL at all: everyone
    # A conditional (callback) allow grants nobody; a conditional deny denies ([MS-DTYP] 2.4.4.6/2.4.4.7).
    assert readers_from_aces([Ace(0x09, 0, 0x1, ana), Ace(0x00, 0, 0x1, bo)], names.get) == ("user:bo",)
    assert readers_from_aces([Ace(0x0A, 0, 0x1, ana), Ace(0x00, 0, 0x1, hr)], names.get) == ()


def test_sids_parse_both_ways() -> None:
    for sid in ("S-1-1-0", "S-1-5-11", "S-1-5-21-2192983228-2057842462-1756563460-1001", "S-1-0x0001FFFFFFFF-7"):
        raw = sid_bytes(sid)
        assert sid_text(raw) == (sid, len(raw))
    assert sid_text(sid_bytes("s-1-0x0000FFFFFFFF-7"))[0] == "S-1-4294967295-7"  # decimal below 2**32
    assert sid_bytes("S-1-5-32-544").hex() == "01020000000000052000000020020000"  # [MS-DTYP] 2.4.2.2's form
    for bad in ("", "S-1", "X-1-5", "S-1-5-x", "S-1-5-4294967296"):
        with pytest.raises(ValueError):
            sid_bytes(bad)
    with pytest.raises(ValueError):
        parse_dacl(b"\x01\x00")
    broken = bytearray(sddl_to_binary("D:(A;;FR;;;WD)"))
    broken[-18] = 200  # the one ACE (its last 20 bytes) says it is 200 bytes long
    with pytest.raises(ValueError):
        parse_dacl(bytes(broken))
    assert readers_from_aces([Ace(0, 0, 1, "S-1-5-21-1-2-3-1001")], {"S-1-5-21-1-2-3-1001": "user:x"}.get) == ("user:x",)


# -- faults ----------------------------------------------------------------------------------------


def test_a_wrong_password_is_refused_in_words(samba: Samba, caplog: pytest.LogCaptureFixture) -> None:
    wrong = "not-the-Password-93jd"
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceAuthFailed) as caught:
        listing(source(samba, password=wrong))
    assert "refused the user name or password of kn_svc" in str(caught.value)
    assert wrong not in str(caught.value) and wrong not in caplog.text
    with pytest.raises(SourceAuthFailed):
        listing(source(samba, username="kn_nobody"))
    with pytest.raises(SourceAuthFailed, match="EXAMPLE\\\\kn_svc"):
        listing(source(samba, password=wrong, domain="EXAMPLE"))


def test_a_missing_share_or_folder_is_not_found(samba: Samba) -> None:
    with pytest.raises(SourceNotFound, match="no share named 'nosuch'"):
        listing(source(samba, share="nosuch"))
    with pytest.raises(SourceNotFound, match="no folder 'no/such/folder'"):
        listing(source(samba, path="no/such/folder"))
    with pytest.raises(SourceNotFound), source(samba, path="no/such/folder") as src:
        src.check()


def test_a_file_deleted_between_listing_and_fetch_is_gone(samba: Samba, folder: str) -> None:
    samba.write(f"{folder}/stays.txt", "stays")
    samba.write(f"{folder}/goes.txt", "goes")
    samba.write(f"{folder}/sub/goes-too.txt", "goes too")
    src = source(samba, path=folder)
    with src:
        entries = {e.path: e for e in src.entries()}
        os.remove(samba.root / folder / "goes.txt")
        (samba.root / folder / "sub" / "goes-too.txt").unlink()
        (samba.root / folder / "sub").rmdir()
        with pytest.raises(EntryGone, match=r"goes\.txt is no longer on the share"):
            read(src, entries["goes.txt"])
        with pytest.raises(EntryGone):
            read(src, entries["sub/goes-too.txt"])
        assert read(src, entries["stays.txt"]) == b"stays"  # the connection goes on


def test_a_file_deleted_while_its_folder_is_listed_is_left_out(samba: Samba, folder: str) -> None:
    for i in range(40):
        samba.write(f"{folder}/f{i:02d}.txt", f"file {i}")
    src = source(samba, path=folder)
    with src:
        seen = []
        for entry in src.entries():
            if not seen:  # the folder was listed; its descriptors are being read
                for i in range(30, 40):
                    os.remove(samba.root / folder / f"f{i:02d}.txt")
            seen.append(entry.path)
    assert "f00.txt" in seen and "f39.txt" not in seen and len(seen) < 40


def test_a_stopped_server_is_unavailable_in_words(own_samba: Samba) -> None:
    for i in range(3):
        own_samba.write(f"d{i}/f.txt", f"file {i}")
    src = source(own_samba, timeout=5)
    iterator = src.entries()
    next(iterator)
    own_samba.stop()
    with pytest.raises(SourceUnavailable, match=f"127.0.0.1:{own_samba.port}") as caught:
        list(iterator)
    assert SECRET not in str(caught.value)
    src.close()
    with pytest.raises(SourceUnavailable, match="did not answer") as refused:
        listing(source(own_samba, timeout=5))
    assert "check the server and port" in str(refused.value)

    own_samba.start()  # the next run converges
    assert sorted(listing(source(own_samba))) == ["d0/f.txt", "d1/f.txt", "d2/f.txt"]


def test_a_fetch_on_a_stopped_server_is_unavailable(own_samba: Samba) -> None:
    own_samba.write("f.txt", "f")
    src = source(own_samba, timeout=5)
    (entry,) = list(src.entries())
    own_samba.stop()
    with pytest.raises(SourceUnavailable):
        read(src, entry)
    src.close()


def test_the_password_is_in_no_log_message_or_repr(
    samba: Samba, folder: str, caplog: pytest.LogCaptureFixture, capfd
) -> None:  # type: ignore[no-untyped-def]
    samba.write(f"{folder}/a.txt", "a")
    texts = []
    with caplog.at_level(logging.DEBUG):
        src = source(samba, path=folder)
        texts.append(repr(src))
        texts.append(src.location())
        with src:
            for e in src.entries():
                texts.append(repr(e))
                read(src, e)
            texts.append(src.check())
        for bad in ({"password": "x" + SECRET}, {"share": "nosuch"}, {"path": "nosuch"}):
            with pytest.raises(Exception) as caught:
                listing(source(samba, **bad))
            texts.append(str(caught.value) + repr(caught.value))
    out, err = capfd.readouterr()
    texts += [caplog.text, out, err]
    assert all(SECRET not in t for t in texts)


# -- SIDs to readers (knowledge/sources/sids.py) --------------------------------------------------------


def test_sid_map_maps_sids_to_readers_and_rejects_bad_entries(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path, sources={"sid_map": {"s-1-5-21-1-2-3-1001": "user:ana", "S-1-5-21-1-2-3-2001": " Group:HR "}}
    )
    mapper = sid_mapper(settings)
    assert mapper("S-1-5-21-1-2-3-1001") == "user:ana"
    assert mapper("s-1-5-21-1-2-3-2001") == "group:HR"
    assert mapper("S-1-5-21-1-2-3-1002") is None  # no directory: unknown
    asked: list[str] = []
    looked = sid_mapper(settings, lambda sid: asked.append(sid) or "user:bo")  # type: ignore[func-returns-value]
    assert looked("S-1-5-21-1-2-3-1001") == "user:ana" and looked("S-1-5-21-1-2-3-1002") == "user:bo"
    assert looked("S-1-5-21-1-2-3-1002") == "user:bo" and asked == ["S-1-5-21-1-2-3-1002"]  # asked once
    with pytest.raises(ConfigError, match="not a SID"):
        load_settings(data_dir=tmp_path, sources={"sid_map": {"ana": "user:ana"}})
    with pytest.raises(ConfigError, match="user:<username> or group:<name>"):
        load_settings(data_dir=tmp_path, sources={"sid_map": {"S-1-5-21-1-2-3-1001": "ana"}})
    with pytest.raises(ConfigError, match="not an LDAP attribute"):
        load_settings(data_dir=tmp_path, sources={"sid_attribute": "object sid"})


def test_sid_map_readers_through_the_source(samba: Samba, folder: str, tmp_path: Path) -> None:
    samba.write(f"{folder}/a.txt", "a")
    samba.set_acl(f"{folder}/a.txt", f"D:P(A;;FR;;;{samba.sids['kn_ana']})(A;;FR;;;{samba.sids[GROUP]})")
    settings = load_settings(
        data_dir=tmp_path, sources={"sid_map": {samba.sids["kn_ana"]: "user:ana", samba.sids[GROUP]: "group:hr"}}
    )
    src = SmbSource(samba.config(path=folder), SourceContext(settings=settings, principal_for_sid=sid_mapper(settings)))
    assert listing(src)["a.txt"].readers == ("group:hr", "user:ana")


#: A test schema: AD's objectSid (binary, with the equality rule AD's own schema file lacks) and
#: Samba's sambaSID (text), on an auxiliary class.
SID_SCHEMA = """
attributetype ( 1.2.840.113556.1.4.146 NAME 'objectSid' DESC 'MS-DTYP 2.4.2.2 SID'
    EQUALITY octetStringMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 SINGLE-VALUE )
attributetype ( 1.3.6.1.4.1.7165.2.1.20 NAME 'sambaSID' DESC 'Security ID'
    EQUALITY caseIgnoreIA5Match SYNTAX 1.3.6.1.4.1.1466.115.121.1.26{64} SINGLE-VALUE )
objectclass ( 1.3.6.1.4.1.55555.42.1 NAME 'knSidHolder' SUP top AUXILIARY MAY ( objectSid $ sambaSID ) )
"""
ANA_SID, BO_SID, HR_SID, STAFF_SID = (
    "S-1-5-21-3623811015-3361044348-30300820-1013",
    "S-1-5-21-3623811015-3361044348-30300820-1014",
    "S-1-5-21-3623811015-3361044348-30300820-2001",
    "S-1-5-21-3623811015-3361044348-30300820-2002",
)


@pytest.fixture(scope="module")
def sid_slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """slapd with SIDs on ana and bo (objectSid) and the groups hr (objectSid) and staff (sambaSID)."""
    import base64

    from tests.helpers.ldap import BASE, start_slapd

    server = start_slapd(tmp_path_factory.mktemp("sid-slapd"), schema=SID_SCHEMA)
    try:
        for dn, attribute, value in (
            (f"uid=ana,ou=people,{BASE}", "objectSid:", base64.b64encode(sid_bytes(ANA_SID)).decode()),
            (f"uid=bo,ou=people,{BASE}", "objectSid:", base64.b64encode(sid_bytes(BO_SID)).decode()),
            (f"cn=hr,ou=groups,{BASE}", "objectSid:", base64.b64encode(sid_bytes(HR_SID)).decode()),
            (f"cn=staff,ou=groups,{BASE}", "sambaSID", STAFF_SID),
            (f"uid=svc,ou=people,{BASE}", "sambaSID", BO_SID),  # a text SID that is bo's binary one
        ):
            server.modify(
                f"dn: {dn}\nchangetype: modify\nadd: objectClass\nobjectClass: knSidHolder\n-\n"
                f"add: {attribute.rstrip(':')}\n{attribute}: {value}\n-\n"
            )
        yield server
    finally:
        server.stop()


def _ldap_settings(tmp_path: Path, url: str, **sources: object) -> Settings:
    from tests.helpers.ldap import BASE

    return load_settings(
        data_dir=tmp_path,
        accounts={
            "ldap": {
                "url": url,
                "user_dn": f"uid={{username}},ou=people,{BASE}",
                "group_base": f"ou=groups,{BASE}",
            }
        },
        sources=sources,
    )


def test_sids_are_looked_up_in_the_ldap_directory(sid_slapd: object, tmp_path: Path) -> None:
    settings = _ldap_settings(tmp_path, sid_slapd.url, sid_map={STAFF_SID: "group:mapped-staff"})  # type: ignore[attr-defined]
    assert username_attribute(settings.accounts.ldap) == "uid"
    mapper = sid_mapper(settings)
    assert mapper(ANA_SID) == "user:ana"  # binary objectSid, a person: uid
    assert mapper(HR_SID) == "group:hr"  # a groupOfNames: its cn
    assert mapper(STAFF_SID) == "group:mapped-staff"  # sid_map first
    assert mapper("S-1-5-21-3623811015-3361044348-30300820-9999") is None
    assert binary_filter_value(b"\x01\x05\x00") == "\\01\\05\\00"

    text = sid_mapper(_ldap_settings(tmp_path, sid_slapd.url, sid_attribute="sambaSID"))  # type: ignore[attr-defined]
    assert text(STAFF_SID) == "group:staff"
    assert text(BO_SID) == "user:svc"  # the text attribute, not the binary one
    assert text(ANA_SID) is None


def test_a_directory_that_does_not_answer_stops_the_run(tmp_path: Path) -> None:
    from tests.helpers.api import free_port

    mapper = sid_mapper(_ldap_settings(tmp_path, f"ldap://127.0.0.1:{free_port()}"))
    with pytest.raises(SourceUnavailable, match="could not be asked who the Windows SID"):
        mapper(ANA_SID)
