"""The one policy table (knowledge.people.policy): every action for every role, over a real catalog,
real sharing and a fake embedder; and every public method of the Workbench and of its desks names
the action it checks (a method naming none would be open by default)."""

from __future__ import annotations

import inspect

import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, PermissionDenied, StoreNotFound
from knowledge.people import LOCAL_ADMIN, Actor
from knowledge.people.desk import AccountDesk
from knowledge.people.policy import ACTIONS, action_of
from knowledge.system import System
from knowledge.workbench import EvaluationDesk, LlmConfigDesk, PortableDesk, SyncDesk, Workbench

PW = "correct horse battery"
ROLES = ("local admin", "admin", "owner", "reader", "writer", "stranger")
OK = None
ADMIN_ONLY = (OK, OK, PermissionDenied, PermissionDenied, PermissionDenied, PermissionDenied)
FREE = (OK,) * 6

#: ``{action: outcome per role}`` (in :data:`ROLES`' order) for the store ``s`` (owned by ``owner``,
#: shared read with ``reader`` and write with ``writer``) and its file. Written out by hand: a new row
#: of ACTIONS needs its line here.
EXPECTED: dict[str, tuple[type[Exception] | None, ...]] = {
    "store.list": FREE,
    "store.create": (OK, OK, OK, OK, OK, InvalidArgument),  # a name taken by a store one cannot see
    "store.read": (OK, OK, OK, OK, OK, StoreNotFound),
    "store.write": (OK, OK, OK, PermissionDenied, OK, StoreNotFound),
    "store.own": (OK, OK, OK, PermissionDenied, PermissionDenied, StoreNotFound),
    "file.read": (OK, OK, OK, OK, OK, PermissionDenied),
    "file.save": FREE,
    "file.manage": ADMIN_ONLY,
    "files.move": ADMIN_ONLY,
    "files.cleanup": ADMIN_ONLY,
    "template.read": FREE,
    "template.save": ADMIN_ONLY,
    "template.delete": ADMIN_ONLY,
    "template.derive": FREE,
    "account.self": FREE,
    "account.list": FREE,
    "account.manage": ADMIN_ONLY,
    "audit.read": FREE,
    "audit.read_all": ADMIN_ONLY,
    "backup": ADMIN_ONLY,
    "settings.manage": ADMIN_ONLY,
    "evaluation.sets": FREE,
    "system.read": FREE,
    "actor.switch": FREE,
    "audit.record": FREE,
    "usage.read": FREE,
    "quota.manage": ADMIN_ONLY,
    "job.run": FREE,
    "account.join": FREE,  # an invitation or the set-up token is the credential (checked by the desk)
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A system with an admin and members owner/reader/writer/stranger; the owner's store ``s`` with
    one file, shared read with reader and write with writer. Yields ``(system, {role: Actor}, file id)``."""
    data = tmp_path_factory.mktemp("policy") / "data"
    system = System(load_settings(data_dir=data), embedder_factory=lambda m: HashEmbedder(dimension=16))
    people = system.people
    people.set_up_admin("root", PW)
    for name in ("owner", "reader", "writer", "stranger"):
        people.accounts.create(name, PW)
    owner = Workbench(system, actor=people.accounts.actor("owner"))
    owner.ingest_file("s", b"The parental leave policy grants sixteen weeks.", "leave.txt")
    owner.share_store("s", "user", "reader", "read")
    owner.share_store("s", "user", "writer", "write")
    actors: dict[str, Actor] = {
        "local admin": LOCAL_ADMIN,
        "admin": people.accounts.actor("root"),
        **{n: people.accounts.actor(n) for n in ("owner", "reader", "writer", "stranger")},
    }
    fid = owner.store_files("s")[0].file_id
    yield system, actors, fid
    system.close()


def test_every_action_has_its_expectations_written():
    assert set(EXPECTED) == set(ACTIONS)


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_every_action_for_every_role(world, name):
    system, actors, fid = world
    resource = {"store": "s", "file": fid}.get(ACTIONS[name].resource)
    for role, expected in zip(ROLES, EXPECTED[name], strict=True):
        actor = actors[role]
        if expected is None:
            system.policy.check(actor, name, resource)
            assert system.policy.allowed(actor, name, resource), (name, role)
        else:
            with pytest.raises(expected):
                system.policy.check(actor, name, resource)
            assert not system.policy.allowed(actor, name, resource), (name, role)


def test_a_new_store_name_may_be_taken_by_anyone_and_a_bad_one_by_nobody(world):
    system, actors, _ = world
    for role in ROLES:
        system.policy.check(actors[role], "store.create", "fresh")
        if role != "local admin":
            with pytest.raises(InvalidArgument):
                system.policy.check(actors[role], "store.create", "agent-memory~x")


def test_the_refusals_keep_their_words(world):
    system, actors, _ = world
    member = actors["reader"]
    with pytest.raises(PermissionDenied, match=r"^Only an admin may back up every store\.$"):
        system.policy.check(member, "backup")
    with pytest.raises(PermissionDenied, match=r"^Only an admin may save a template\.$"):
        system.policy.check(member, "template.save")
    with pytest.raises(PermissionDenied, match="may not change the store 's': it is shared with them read-only"):
        system.policy.check(member, "store.write", "s")


FACES = (Workbench, PortableDesk, SyncDesk, EvaluationDesk, LlmConfigDesk, AccountDesk)
#: The Workbench's properties that are desks (each desk is one of FACES, its methods checked there).
DESKS = {"accounts"}


@pytest.mark.parametrize("face", FACES, ids=lambda f: f.__name__)
def test_every_public_method_names_an_action(face):
    unnamed, unknown = [], []
    for name, member in inspect.getmembers(face):
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            assert face is Workbench and name in DESKS, f"{face.__name__}.{name}: a public part"
            continue
        if not callable(member):
            continue
        found = action_of(member)
        if not found:
            unnamed.append(name)
        unknown += [(name, a) for a in found or () if a not in ACTIONS]
    assert unnamed == [], f"{face.__name__}: public methods naming no action (mark them with @checks)"
    assert unknown == []


def test_the_desks_check_as_their_actions_say(world):
    system, actors, _ = world
    stranger = Workbench(system, actor=actors["stranger"])
    reader = Workbench(system, actor=actors["reader"])
    with pytest.raises(StoreNotFound):
        stranger.portable.export_store("s", "/tmp/never.kb")
    with pytest.raises(PermissionDenied):
        reader.syncs.forget("s", "/tmp")
    with pytest.raises(PermissionDenied, match="back up every store"):
        reader.portable.backup("/tmp/never.tar")
    with pytest.raises(PermissionDenied, match="change LLM configs"):
        reader.llm_configs().delete("offline")
    with pytest.raises(PermissionDenied, match="save a template"):
        reader.evaluations.keep_as_template("s", 100, 10)
    assert reader.syncs.synced_folders("s") == [] and stranger.evaluations.runs() == []
    assert reader.as_user(actors["stranger"]).actor is actors["stranger"]  # built, over the same system
    assert reader.as_user(actors["stranger"]).same_system(reader)
