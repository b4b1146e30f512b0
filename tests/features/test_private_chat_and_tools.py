"""Issue 28 below the pages: chat sessions private to their user (both catalog engines), the chat's
stores and cross-store search only what the user may read, the knowledge tools handed a user's view
never reaching another's store, and writing tools needing write access."""

from __future__ import annotations

import pytest

from knowledge.chat.store import SessionNotFound
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, StoreNotFound
from knowledge.system import System
from knowledge.tools import KnowledgeTools
from knowledge.workbench import Workbench

PW = "correct horse battery"


@pytest.fixture
def system(catalog_settings):
    s = System(catalog_settings, embedder_factory=lambda m: HashEmbedder(dimension=32, max_tokens=64))
    yield s
    s.close()


@pytest.fixture
def team(system, wb):
    """An admin root, members ana and bo; ana's private store ``hr``, bo's store ``ops``."""
    system.people.set_up_admin("root", PW, "The Admin")
    system.people.accounts.create("ana", PW, display_name="Ana")
    system.people.accounts.create("bo", PW, display_name="Bo")
    views = {u: wb.as_user(system.people.accounts.actor(u)) for u in ("root", "ana", "bo")}
    views["ana"].ingest_file("hr", b"The parental leave policy grants sixteen weeks.", "leave.txt")
    views["bo"].ingest_file("ops", b"The on-call rota changes every Monday.", "rota.txt")
    return wb, views


def test_chat_sessions_are_private_to_their_user(team, chats):
    wb, v = team
    base = chats.service(wb)
    ana, bo, root = base.as_user(v["ana"]), base.as_user(v["bo"]), base.as_user(v["root"])
    old = base.create_session("Before accounts")  # the local admin's: no owner, the admins'
    mine = ana.create_session("Ana's chat", stores=["hr"])
    assert mine.owner == "ana" and old.owner is None
    assert [s.id for s in ana.sessions()] == [mine.id]
    assert bo.sessions() == []
    assert {s.id for s in root.sessions()} == {old.id}  # an admin: the owner-less ones, not ana's
    assert {s.id for s in base.sessions()} == {old.id, mine.id}  # the local admin (CLI): all
    for attempt in (
        lambda: bo.session(mine.id),
        lambda: bo.messages(mine.id),
        lambda: bo.rename(mine.id, "x"),
        lambda: bo.delete_session(mine.id),
        lambda: bo.set_stores(mine.id, []),
        lambda: bo.attachments(mine.id),
        lambda: bo.send(mine.id, "hello"),
        lambda: bo.traces(mine.id),
        lambda: bo.start_turn(mine.id, [], "hi"),
        lambda: root.session(mine.id),
    ):
        with pytest.raises(SessionNotFound):
            attempt()
    assert ana.session(mine.id).title == "Ana's chat"  # untouched
    ana.send(mine.id, "How long is parental leave?")
    assert bo.traces() == [] and all(t.session_id == mine.id for t in ana.traces())
    assert bo.running_turn(mine.id) is None
    bo.prune_empty(older_than_s=0)  # bo's pruning never reaches ana's sessions
    assert {s.id for s in base.sessions()} == {old.id, mine.id}


def test_chat_stores_and_search_hold_only_what_the_user_reads(team, chats):
    wb, v = team
    base = chats.service(wb)
    bo = base.as_user(v["bo"])
    with pytest.raises(StoreNotFound):
        bo.create_session(stores=["hr"])
    s = bo.create_session(stores=["ops"])
    with pytest.raises(StoreNotFound):
        bo.set_stores(s.id, ["ops", "hr"])
    assert bo.default_stores() == ["ops"]
    reply = bo.send(s.id, "parental leave sixteen weeks")
    assert all(c["store"] == "ops" for c in reply.citations)
    # a model asking for ana's store by name is refused, and nothing of it comes back
    kn = bo.knowledge(s.id)
    from knowledge.chat.service import _Turn  # the turn's record of hits (module-private to the chat)

    out = bo._search(bo.session(s.id), bo.configs.chat(None), kn, {"store": "hr", "query": "leave"}, _Turn("q"))
    assert not out.ok and "sixteen" not in out.text
    # ana un-shares nothing, but a store shared once and taken back drops out of bo's chat
    v["ana"].share_store("hr", "user", "bo", "read")
    bo.set_stores(s.id, ["ops", "hr"])
    assert bo.knowledge(s.id).stores == ["ops", "hr"]
    v["ana"].unshare_store("hr", "user", "bo")
    assert bo.knowledge(s.id).stores == ["ops"]


def test_tools_handed_a_users_view_cannot_reach_another_users_store(team):
    _, v = team
    tools = KnowledgeTools(v["bo"])
    for name, args in (
        ("vector_search", {"store": "hr", "query": "leave"}),
        ("vector_upsert", {"store": "hr", "file_id": "x", "text": "bo was here"}),
        ("vector_delete_file", {"store": "hr", "file_id": v["ana"].store_files("hr")[0].file_id}),
    ):
        r = tools.call(name, args)
        assert not r.ok and "sixteen" not in r.text and "hr" in r.text, (name, r.text)
    assert [f.file_name for f in v["ana"].store_files("hr")] == ["leave.txt"]
    # read-only sharing: search works, writing is refused
    v["ana"].share_store("hr", "user", "bo", "read")
    assert "sixteen" in tools.call("vector_search", {"store": "hr", "query": "parental leave"}).text
    r = tools.call("vector_upsert", {"store": "hr", "file_id": "x", "text": "bo was here"})
    assert not r.ok and "read-only" in r.text
    assert [f.file_name for f in v["ana"].store_files("hr")] == ["leave.txt"]
    # write access: the writing tools work
    v["ana"].share_store("hr", "user", "bo", "write")
    assert tools.call("vector_upsert", {"store": "hr", "file_id": "x", "file_name": "bo.txt", "text": "bo was here"}).ok


def test_each_users_memories_live_in_a_collection_of_their_own(team):
    from knowledge.agent_memory import VectorMemory, user_collection

    wb, _ = team
    assert user_collection("agent-memory", None) == "agent-memory"
    assert user_collection("agent-memory", "ana") == "agent-memory~ana"
    # whatever one types, two users never share a collection (a username holds no "~")
    assert user_collection("x~bo", "ana") != user_collection("x", "bo")
    mem = {
        u: VectorMemory(wb.backend(), wb.embedder(), collection=user_collection("agent-memory", u)) for u in ("ana", "bo")
    }
    mem["bo"].remember("bo's locker code is 4711", dataset="private")
    assert mem["ana"].recall("locker code", dataset=None) == [] and mem["ana"].datasets() == {}
    assert mem["ana"].forget(dataset="private") == 0
    assert mem["bo"].datasets() == {"private": 1}


def test_each_persons_chat_service_is_built_over_the_one_shared_state(team, chats, tmp_path):
    """No copy of a service per person: each is built over the same Chats (session store, locks)."""
    _, v = team
    ana, bo = chats.service(v["ana"]), chats.service(v["bo"])
    assert ana.wb is v["ana"] and bo.wb is v["bo"] and ana.store is bo.store is chats.store
    assert ana._lock("s1") is bo._lock("s1")  # one turn of a session at a time, whoever asks
    assert ana.as_user(v["bo"]).wb is v["bo"] and ana.as_user(v["bo"]).chats is chats
    other = System(load_settings(data_dir=tmp_path / "other"), embedder_factory=lambda m: HashEmbedder(32, 64))
    try:
        with pytest.raises(InvalidArgument, match="another system"):
            chats.service(Workbench(other))
    finally:
        other.close()
