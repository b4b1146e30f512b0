"""Access per document on the REST API: a file's readers are set as the reserved attribute
``readers`` of the file object (create, file batches per file and batch-wide, update), and a member
who may not read a file never learns of it -- the store's file list, its file object (404 in the
words of a missing id), its content, searches, the vector store's ``file_counts`` and
``usage_bytes``, a file batch's counts and files, ``/v1/files``. Real users with their own API keys
(``kn-...``) against the app in-process: root (admin, the store's owner), ana (group ``hr``) and bo
(not in ``hr``, who may write to the store)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.system import System

PW = "correct horse battery"
SALARIES = "Salaries for the year: ana earns 100, bo earns 90. Salaries are reviewed in spring."
PUBLIC = [f"The handbook page {i} explains salaries reviews, holidays and the office rules {i}." for i in range(4)]


def make_system(path, **settings: Any) -> System:
    return System(
        load_settings(data_dir=path / "data", **settings),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )


def people(system: System) -> dict[str, str]:
    """root (admin), ana (in group hr), bo; each one's key."""
    system.people.set_up_admin("root", PW)
    for name in ("ana", "bo"):
        system.people.accounts.create(name, PW)
    system.people.accounts.create_group("hr")
    system.people.accounts.add_to_group("hr", "ana")
    return {name: system.people.keys.create(name, "tests")[1] for name in ("root", "ana", "bo")}


def upload(c: TestClient, name: str, text: str) -> str:
    r = c.post("/v1/files", files={"file": (name, text.encode(), "text/plain")}, data={"purpose": "assistants"})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def until_done(c: TestClient, vs: str, fid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        r = c.get(f"/v1/vector_stores/{vs}/files/{fid}")
        assert r.status_code == 200, r.text
        if r.json()["status"] != "in_progress":
            return r.json()
        assert time.monotonic() < deadline, "the file was not ingested in time"
        time.sleep(0.05)


def batch_done(c: TestClient, vs: str, batch: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        r = c.get(f"/v1/vector_stores/{vs}/file_batches/{batch}")
        assert r.status_code == 200, r.text
        if r.json()["status"] != "in_progress":
            return r.json()
        assert time.monotonic() < deadline, "the batch was not ingested in time"
        time.sleep(0.05)


@pytest.fixture
def team(tmp_path):
    """root's store ``handbook`` (everyone reads it, bo may write to it) holding four public pages
    and ``salaries.txt``, restricted to group hr, added as one file batch through root's key."""
    system = make_system(tmp_path)
    keys = people(system)
    app = create_app(system)
    clients = {n: TestClient(app, headers={"Authorization": f"Bearer {k}"}) for n, k in keys.items()}
    root = clients["root"]
    vs = root.post("/v1/vector_stores", json={"name": "handbook"}).json()["id"]
    pub = [upload(root, f"page{i}.txt", t) for i, t in enumerate(PUBLIC)]
    sal = upload(root, "salaries.txt", SALARIES)
    batch = root.post(
        f"/v1/vector_stores/{vs}/file_batches",
        json={
            "file_ids": pub,
            "files": [{"file_id": sal, "attributes": {"kind": "pay", "readers": "group:hr"}}],
            "attributes": {"kind": "handbook"},
        },
    )
    assert batch.status_code == 200, batch.text
    assert batch_done(root, vs, batch.json()["id"])["file_counts"]["completed"] == 5
    system.people.sharing.share("handbook", "everyone", "", "read")
    system.people.sharing.share("handbook", "user", "bo", "write")
    yield {"system": system, "vs": vs, "pub": pub, "sal": sal, "batch": batch.json()["id"], **clients}
    for c in clients.values():
        c.close()
    system.close()


def test_a_member_outside_the_readers_never_learns_of_the_file(team):
    vs, sal, pub, batch = team["vs"], team["sal"], team["pub"], team["batch"]
    ana, bo, root = team["ana"], team["bo"], team["root"]
    missing = "file-" + "0" * 32
    # the store's file list and the vector store object's counts
    listed = {
        n: {f["id"] for f in team[n].get(f"/v1/vector_stores/{vs}/files?limit=100").json()["data"]} for n in ("ana", "bo")
    }
    assert listed == {"ana": {*pub, sal}, "bo": set(pub)}
    store = {n: team[n].get(f"/v1/vector_stores/{vs}").json() for n in ("ana", "bo", "root")}
    assert [store[n]["file_counts"]["total"] for n in ("ana", "bo", "root")] == [5, 4, 5]
    assert store["bo"]["file_counts"]["completed"] == 4
    assert store["ana"]["usage_bytes"] - store["bo"]["usage_bytes"] == len(SALARIES.encode())
    mine = {s["name"]: s["file_counts"]["total"] for s in bo.get("/v1/vector_stores").json()["data"]}
    assert mine == {"handbook": 4}
    # its file object, content, attributes, removal: 404 in the words of a missing id
    for method, path, body in (
        ("GET", f"/v1/vector_stores/{vs}/files/{{}}", None),
        ("GET", f"/v1/vector_stores/{vs}/files/{{}}/content", None),
        ("POST", f"/v1/vector_stores/{vs}/files/{{}}", {"attributes": {"kind": "leaked"}}),
        ("DELETE", f"/v1/vector_stores/{vs}/files/{{}}", None),
        ("GET", "/v1/files/{}", None),
        ("GET", "/v1/files/{}/content", None),
    ):
        hidden = bo.request(method, path.format(sal), json=body)
        absent = bo.request(method, path.format(missing), json=body)
        assert hidden.status_code == absent.status_code == 404, (method, path, hidden.text, absent.text)
        assert hidden.json()["error"]["message"] == absent.json()["error"]["message"].replace(missing, sal)
        assert "salaries" not in hidden.text.lower()
        seen = ana.request("GET", path.format(sal)) if method == "GET" else None
        assert seen is None or seen.status_code == 200, (path, seen.text if seen else None)
    assert SALARIES in ana.get(f"/v1/vector_stores/{vs}/files/{sal}/content").json()["data"][0]["text"]
    assert ana.get(f"/v1/files/{sal}/content").content == SALARIES.encode()
    assert sal not in {f["id"] for f in bo.get("/v1/files").json()["data"]}
    assert sal in {f["id"] for f in ana.get("/v1/files").json()["data"]}
    # a search: k results are k readable results, never the hidden file's
    for mode in ("hybrid", "vector", "lexical"):
        body = {"query": "salaries ana bo earns", "max_num_results": 3, "mode": mode}
        got = {n: team[n].post(f"/v1/vector_stores/{vs}/search", json=body).json()["data"] for n in ("ana", "bo")}
        assert sal in {h["file_id"] for h in got["ana"]}, mode
        assert len(got["bo"]) == 3 and not {h["file_id"] for h in got["bo"]} - set(pub), mode
        assert all(SALARIES not in h["content"][0]["text"] for h in got["bo"])
    filtered = bo.post(
        f"/v1/vector_stores/{vs}/search",
        json={"query": "salaries", "filters": {"type": "eq", "key": "file_id", "value": sal}},
    )
    assert filtered.status_code == 200 and filtered.json()["data"] == []
    # the file batch: its counts and files leave the hidden file out
    counts = {n: team[n].get(f"/v1/vector_stores/{vs}/file_batches/{batch}").json()["file_counts"] for n in ("ana", "bo")}
    assert (counts["ana"]["total"], counts["ana"]["completed"]) == (5, 5)
    assert counts["bo"] == {"in_progress": 0, "completed": 4, "failed": 0, "cancelled": 0, "total": 4}
    files = {
        n: [f["id"] for f in team[n].get(f"/v1/vector_stores/{vs}/file_batches/{batch}/files").json()["data"]]
        for n in ("ana", "bo")
    }
    assert sal in files["ana"] and sorted(files["bo"]) == sorted(pub)
    # bo may write to the store: a visible file is his to update, the hidden one is not there
    assert bo.post(f"/v1/vector_stores/{vs}/files/{pub[0]}", json={"attributes": {"kind": "x"}}).status_code == 200
    assert root.get(f"/v1/vector_stores/{vs}/files/{sal}").json()["attributes"] == {"kind": "pay", "readers": "group:hr"}


def test_readers_round_trip_as_an_attribute_and_a_bad_reader_is_400(team):
    vs, sal, pub = team["vs"], team["sal"], team["pub"]
    root, ana, bo, system = team["root"], team["ana"], team["bo"], team["system"]
    obj = root.get(f"/v1/vector_stores/{vs}/files/{pub[1]}").json()
    assert obj["attributes"] == {"kind": "handbook"}  # not restricted: no readers key
    assert system.catalog.get_file("handbook", sal).readers == ("group:hr",)
    # update with readers: set (a username as its account spells it), returned in canonical form
    r = root.post(
        f"/v1/vector_stores/{vs}/files/{sal}", json={"attributes": {"kind": "pay", "readers": "user:BO , group:hr"}}
    )
    assert r.status_code == 200, r.text
    assert r.json()["attributes"] == {"kind": "pay", "readers": "user:bo, group:hr"}
    assert bo.get(f"/v1/vector_stores/{vs}/files/{sal}").json()["attributes"]["readers"] == "user:bo, group:hr"
    # update without readers keeps them as they are
    r = root.post(f"/v1/vector_stores/{vs}/files/{sal}", json={"attributes": {"kind": "payroll"}})
    assert r.json()["attributes"] == {"kind": "payroll", "readers": "user:bo, group:hr"}
    assert system.catalog.get_file("handbook", sal).readers == ("user:bo", "group:hr")
    # a bad reader: 400 naming the field, nothing changed
    for value, words in (
        ("group:nope", "no group 'nope'"),
        ("user:nobody", "no account 'nobody'"),
        ("role:admin", "'user:<name>', 'group:<name>' or 'everyone'"),
        (["group:hr"], "must be a string"),
        (5, "must be a string"),
        ("", "No reader is given"),  # blank: it opened the file to everyone (the new-user trial)
        (" , ", "No reader is given"),
        ("everyone, group:hr", "'everyone' stands alone"),
    ):
        r = root.post(f"/v1/vector_stores/{vs}/files/{sal}", json={"attributes": {"kind": "other", "readers": value}})
        assert r.status_code == 400, (value, r.text)
        assert r.json()["error"]["param"] == "attributes.readers" and words in r.json()["error"]["message"], r.text
    assert root.get(f"/v1/vector_stores/{vs}/files/{sal}").json()["attributes"] == {
        "kind": "payroll",
        "readers": "user:bo, group:hr",
    }
    # everyone: the restriction is lifted, the key is gone from the attributes
    r = root.post(f"/v1/vector_stores/{vs}/files/{sal}", json={"attributes": {"kind": "pay", "readers": "everyone"}})
    assert r.json()["attributes"] == {"kind": "pay"} and system.catalog.get_file("handbook", sal).readers is None
    assert sal in {f["id"] for f in ana.get(f"/v1/vector_stores/{vs}/files").json()["data"]}
    # create and batch: a bad reader is refused before anything starts
    extra = upload(root, "extra.txt", "Extra notes about parking.")
    for path, body, param in (
        ("files", {"file_id": extra, "attributes": {"readers": "group:nope"}}, "attributes.readers"),
        ("file_batches", {"file_ids": [extra], "attributes": {"readers": "team:x"}}, "attributes.readers"),
        ("file_batches", {"files": [{"file_id": extra, "attributes": {"readers": 3}}]}, "attributes.readers"),
    ):
        r = root.post(f"/v1/vector_stores/{vs}/{path}", json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    assert extra not in {f["id"] for f in root.get(f"/v1/vector_stores/{vs}/files").json()["data"]}
    # create: the readers are the file's before its first chunk, and its object shows them
    r = root.post(f"/v1/vector_stores/{vs}/files", json={"file_id": extra, "attributes": {"readers": "group:hr"}})
    assert r.status_code == 200 and r.json()["attributes"] == {"readers": "group:hr"}, r.text
    assert until_done(root, vs, extra)["attributes"] == {"readers": "group:hr"}
    assert ana.get(f"/v1/vector_stores/{vs}/files/{extra}").status_code == 200
    assert bo.get(f"/v1/vector_stores/{vs}/files/{extra}").status_code == 404


def test_a_batch_wide_readers_holds_unless_a_file_names_its_own(team):
    vs, root, ana, bo, system = team["vs"], team["root"], team["ana"], team["bo"], team["system"]
    a, b, c = (upload(root, f"memo{i}.txt", f"Memo {i} about the reorganisation of team {i}.") for i in range(3))
    r = root.post(
        f"/v1/vector_stores/{vs}/file_batches",
        json={
            "file_ids": [a],
            "files": [
                {"file_id": b, "attributes": {"topic": "org"}},  # own attributes, the batch's readers
                {"file_id": c, "attributes": {"readers": "everyone"}},
            ],
            "attributes": {"topic": "reorg", "readers": "group:hr"},
        },
    )
    assert r.status_code == 200, r.text
    batch = r.json()["id"]
    assert batch_done(root, vs, batch)["file_counts"]["completed"] == 3
    assert [system.catalog.get_file("handbook", f).readers for f in (a, b, c)] == [("group:hr",), ("group:hr",), None]
    attrs = {f["id"]: f["attributes"] for f in root.get(f"/v1/vector_stores/{vs}/file_batches/{batch}/files").json()["data"]}
    assert attrs == {a: {"topic": "reorg", "readers": "group:hr"}, b: {"topic": "org", "readers": "group:hr"}, c: {}}
    assert ana.get(f"/v1/vector_stores/{vs}/file_batches/{batch}").json()["file_counts"]["total"] == 3
    assert bo.get(f"/v1/vector_stores/{vs}/file_batches/{batch}").json()["file_counts"]["total"] == 1


def test_a_writer_who_leaves_himself_out_is_answered_once_then_not_found(team):
    """bo may write to the store, not read hr's files: the file he adds for hr is answered as it was
    queued, then it is hr's; the same bytes as a file he may not read are never named to him."""
    vs, root, ana, bo = team["vs"], team["root"], team["ana"], team["bo"]
    fid = upload(bo, "review.txt", "Bo's review of the spring salaries round.")
    r = bo.post(f"/v1/vector_stores/{vs}/files", json={"file_id": fid, "attributes": {"readers": "group:hr"}})
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["status"], r.json()["attributes"]) == (fid, "in_progress", {"readers": "group:hr"})
    assert until_done(ana, vs, fid)["status"] == "completed"
    assert bo.get(f"/v1/vector_stores/{vs}/files/{fid}").status_code == 404
    assert fid not in {f["id"] for f in bo.get(f"/v1/vector_stores/{vs}/files").json()["data"]}
    # bo adds the very bytes of salaries.txt: his file is not indexed twice, and nothing names the other
    copy = upload(bo, "copy.txt", SALARIES)
    bo.post(f"/v1/vector_stores/{vs}/files", json={"file_id": copy})
    got = until_done(bo, vs, copy)
    assert got["status"] == "completed" and "duplicate_of" not in got and "chunks" not in got
    assert got["message"] == "copy.txt has the same bytes as a file already in 'handbook'; not indexed twice."
    assert team["sal"] not in str(got) and "salaries.txt" not in str(got)
    assert root.get(f"/v1/vector_stores/{vs}/files/{copy}").json()["duplicate_of"] == team["sal"]


def test_a_file_queued_with_readers_is_hidden_while_it_waits(tmp_path):
    """No worker runs (``ingest.worker_threads = 0``): a file added with readers stays queued, and
    only its readers and the store's owner see it, ``in_progress``, in lists, counts and batches."""
    system = make_system(tmp_path, ingest={"worker_threads": 0})
    keys = people(system)
    app = create_app(system)
    root, ana, bo = (TestClient(app, headers={"Authorization": f"Bearer {keys[n]}"}) for n in ("root", "ana", "bo"))
    try:
        vs = root.post("/v1/vector_stores", json={"name": "handbook"}).json()["id"]
        system.people.sharing.share("handbook", "everyone", "", "read")
        open_, secret = upload(root, "open.txt", PUBLIC[0]), upload(root, "secret.txt", SALARIES)
        r = root.post(
            f"/v1/vector_stores/{vs}/file_batches",
            json={"file_ids": [open_], "files": [{"file_id": secret, "attributes": {"readers": "group:hr"}}]},
        )
        batch = r.json()["id"]
        for c, want in ((root, {open_, secret}), (ana, {open_, secret}), (bo, {open_})):
            files = c.get(f"/v1/vector_stores/{vs}/files").json()["data"]
            assert {f["id"] for f in files} == want and {f["status"] for f in files} == {"in_progress"}
            counts = c.get(f"/v1/vector_stores/{vs}").json()["file_counts"]
            assert (counts["in_progress"], counts["total"]) == (len(want), len(want))
            assert c.get(f"/v1/vector_stores/{vs}/file_batches/{batch}").json()["file_counts"]["total"] == len(want)
        assert ana.get(f"/v1/vector_stores/{vs}/files/{secret}").json()["attributes"] == {"readers": "group:hr"}
        assert bo.get(f"/v1/vector_stores/{vs}/files/{secret}").status_code == 404
    finally:
        for c in (root, ana, bo):
            c.close()
        system.close()
