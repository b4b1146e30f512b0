"""Who may do what, written once: the actions as data (:data:`ACTIONS`) and one check
(:meth:`Policy.check`), in the manner of datasette's permissions (``datasette/default_actions.py``:
actions registered as a table; ``Datasette.allowed(action=, resource=, actor=)`` the one question).

An action acts on a *resource kind*: ``"store"`` (the level the actor holds on the store, from
:class:`~knowledge.people.sharing.Sharing`, must reach :attr:`Action.level`), ``"file"`` (a stored
file: a store the actor sees holds it, or it is an attachment they saved) or ``"site"`` (nothing in
particular: :attr:`Action.admin` says whether only an admin may). The local admin (the person at this
machine before accounts exist, and the CLI without ``--user``) may do everything.

A part of :mod:`knowledge.people`: imports the ground and its own modules only; what it needs to know
of stores and files is handed to :class:`Policy` as functions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from knowledge.errors import InvalidArgument, PermissionDenied, StoreNotFound
from knowledge.people.records import Actor, Level, at_least
from knowledge.people.sharing import Sharing

Resource = Literal["store", "file", "site"]


@dataclass(frozen=True, slots=True)
class Action:
    """One thing a person may be allowed to do.

    Attributes:
        name: ``"<resource>.<verb>"``, e.g. ``"store.write"``; the key of :data:`ACTIONS`.
        description: what it allows, in words (docs, the policy test's table).
        resource: what it acts on (see the module docstring).
        level: for a ``"store"`` action, the sharing level it needs (``read`` < ``write`` < ``owner``).
        admin: only an admin (or the local admin) may.
        refusal: the end of the refusal's sentence, "Only an admin may <refusal>." (admin actions).
    """

    name: str
    description: str
    resource: Resource
    level: Level | None = None
    admin: bool = False
    refusal: str = "do this"


def _table(*actions: Action) -> dict[str, Action]:
    return {a.name: a for a in actions}


#: Every action of the product, by name. A public method of the Workbench or of one of its desks names
#: the action it checks (the policy test fails for a method that names none).
ACTIONS: dict[str, Action] = _table(
    # stores
    Action("store.list", "list the stores one may use (each filtered by store.read)", "site"),
    Action("store.create", "make a new store (its maker owns it)", "store"),
    Action("store.read", "see a store: list its files, search, chat over, export, evaluate", "store", "read"),
    Action("store.write", "change a store's files: ingest, delete, set attributes, sync a folder", "store", "write"),
    Action("store.own", "delete, share, give away, re-embed or move a store; set its settings", "store", "owner"),
    # files
    Action("file.read", "open a stored file (a store one sees holds it, or one saved it)", "file"),
    Action("file.save", "save a file of one's own (a chat attachment)", "site"),
    Action(
        "file.manage",
        "list every stored file, delete stored files, move the file store",
        "site",
        admin=True,
        refusal="manage the stored files",
    ),
    Action(
        "files.move",
        "move every stored file to another file store",
        "site",
        admin=True,
        refusal="move the files to another file store",
    ),
    Action(
        "files.cleanup",
        "delete the old copies a finished move of the files left",
        "site",
        admin=True,
        refusal="delete the old copies of the files",
    ),
    # templates
    Action("template.read", "list and read templates", "site"),
    Action("template.save", "save a template", "site", admin=True, refusal="save a template"),
    Action("template.delete", "delete a template no store uses", "site", admin=True, refusal="delete a template"),
    Action("template.derive", "have a template made for one's own chunking (REST chunking_strategy)", "site"),
    # accounts
    Action("account.self", "change one's own password, display name, API keys and sessions", "site"),
    Action("account.list", "see the accounts' usernames and display names and the group names (whom to share with)", "site"),
    Action(
        "account.manage",
        "add, change, invite and delete accounts and groups; others' keys",
        "site",
        admin=True,
        refusal="manage accounts",
    ),
    # the whole site
    Action("audit.read", "read the audit events of one's stores and one's own account", "site"),
    Action("audit.read_all", "read every audit event", "site", admin=True, refusal="read the whole audit trail"),
    Action("backup", "back up every store and restore a backup", "site", admin=True, refusal="back up every store"),
    Action("settings.manage", "add, change and delete LLM configs", "site", admin=True, refusal="change LLM configs"),
    Action("evaluation.sets", "read and keep question sets and evaluation runs", "site"),
    Action("system.read", "what the process has loaded: models, backends, LLM configs, the file store's home", "site"),
    Action("actor.switch", "make the workbench of a person already signed in (the entry points do)", "site"),
    Action("audit.record", "add an event to the audit trail in one's own name", "site"),
    Action("usage.read", "see one's own use and quotas; have one's own API requests counted", "site"),
    Action(
        "quota.manage",
        "see everyone's use; set the quotas of people, groups and stores",
        "site",
        admin=True,
        refusal="see others' use or set quotas",
    ),
    Action("job.run", "ingest a queued file of a batch checked when it was submitted (the worker)", "site"),
    Action(
        "account.join",
        "create one's own account with an invitation or the first-run set-up token (before"
        " anyone is signed in: the token is the credential); see whether accounts are on",
        "site",
    ),
)


def action(name: str) -> Action:
    """The action called ``name``.

    Raises:
        KeyError: no such action (a programming error: every check names a row of :data:`ACTIONS`).
    """
    try:
        return ACTIONS[name]
    except KeyError:
        raise KeyError(f"no action {name!r} in knowledge.people.policy.ACTIONS") from None


# -- who may read a document (access per document inside a store, migration 18) -------------------
#: The reader that means "whoever may read the store" (a file's readers ``None``; the chunks' payload ``"*"``).
EVERYONE_READER = "*"
#: The kinds of reader a file may name: one account, or a group of accounts.
READER_KINDS = ("user", "group")


def principals(actor: Actor) -> tuple[str, ...]:
    """What ``actor`` is, as a file's readers name it: ``("*", "user:<username>", "group:<g>", ...)``
    (groups sorted), the values a search's ``AnyOf`` filter on the chunks' ``readers`` takes."""
    return (EVERYONE_READER, f"user:{actor.username}", *(f"group:{g}" for g in sorted(actor.groups)))


def parse_readers(values: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """Readers as a person writes them -- ``"group:hr, user:ana"``, a list of such, ``"everyone"`` --
    as stored: ``None`` for ``None`` (not given) and for ``everyone`` (whoever may read the store),
    else the distinct ``kind:name`` principals in their order (kinds lower case, names stripped; a
    username is matched as the account's, see :meth:`Workbench.set_file_readers
    <knowledge.workbench.Workbench.set_file_readers>`).

    Raises:
        InvalidArgument: a reader that is not ``user:<name>``, ``group:<name>`` or ``everyone``;
            nothing given (``""``, ``" , "``, ``[]``: it would open the file to everyone unsaid);
            ``everyone`` beside other readers (which was meant?).
    """
    if values is None:
        return None
    items = values.split(",") if isinstance(values, str) else list(values)
    out: list[str] = []
    everyone = False
    for raw in items:
        if not isinstance(raw, str):
            raise InvalidArgument(f"A reader is written as 'user:<name>', 'group:<name>' or 'everyone', got {raw!r}.")
        text = raw.strip()
        if not text:
            continue
        if text.lower() in ("everyone", EVERYONE_READER):
            everyone = True
            continue
        kind, sep, name = text.partition(":")
        kind, name = kind.strip().lower(), name.strip()
        if not sep or kind not in READER_KINDS or not name:
            raise InvalidArgument(f"A reader is written as 'user:<name>', 'group:<name>' or 'everyone', got {text!r}.")
        principal = f"{kind}:{name}"
        if principal not in out:
            out.append(principal)
    if everyone and out:
        raise InvalidArgument(
            f"'everyone' stands alone: it gives the file back to whoever may read the store, so"
            f" {', '.join(out)} beside it would say nothing. Write 'everyone', or only the people and groups."
        )
    if not everyone and not out:
        raise InvalidArgument(
            "No reader is given: write 'user:<name>', 'group:<name>' (several with commas), or 'everyone'"
            " for whoever may read the store."
        )
    return None if everyone else tuple(out)


def describe_readers(readers: Iterable[str] | None) -> str:
    """Readers in words: ``"everyone who may read the store"`` or ``"group hr, user ana"``."""
    if readers is None:
        return "everyone who may read the store"
    return ", ".join(r.replace(":", " ", 1) for r in readers) or "nobody but the store's owners"


F = TypeVar("F", bound=Callable[..., Any])


def checks(*names: str) -> Callable[[F], F]:
    """Mark a public method of the Workbench or of a desk with the action(s) it checks (``"template.read"``
    for one that needs no check: a free action, named all the same; two for a method that checks one
    of them by its arguments, e.g. ``account.self`` for one's own key and ``account.manage`` for
    another's). The method is not wrapped; the policy test reads the mark (:func:`action_of`) so that
    a method naming none fails it.

    Raises:
        KeyError: at import, for a name that is not a row of :data:`ACTIONS`.
        ValueError: no name given.
    """
    if not names:
        raise ValueError("checks() names at least one action")
    for name in names:
        action(name)

    def mark(method: F) -> F:
        MARKED[f"{method.__module__}.{method.__qualname__}"] = names
        return method

    return mark


#: ``{"module.Class.method": actions}``: what :func:`checks` marked.
MARKED: dict[str, tuple[str, ...]] = {}


def action_of(method: Callable[..., Any]) -> tuple[str, ...] | None:
    """The action(s) a method was marked with by :func:`checks`, or ``None``."""
    return MARKED.get(f"{method.__module__}.{method.__qualname__}")


class Policy:
    """The one place that says whether an actor may do an action.

    Args:
        sharing: owners and grants (:class:`~knowledge.people.sharing.Sharing`).
        store_exists: ``store_exists(name) -> bool``.
        check_new_name: ``check_new_name(name)`` raises ``InvalidArgument`` for a name a new store may
            not have (``store.create`` asks it before anything is recorded).
        file_stores: ``file_stores(file_id) -> list[str]``, the stores holding a stored file.
        file_owner: ``file_owner(file_id) -> str | None``, who saved a stored file that no store holds
            (an attachment), ``None`` when nobody or unknown.
        file_readers: ``file_readers(file_id) -> {store: readers}``, the readers of the file in each
            store holding it (``None``: it inherits that store's sharing).
    """

    def __init__(
        self,
        sharing: Sharing,
        *,
        store_exists: Callable[[str], bool],
        check_new_name: Callable[[str], object] = lambda name: None,
        file_stores: Callable[[str], list[str]] = lambda file_id: [],
        file_owner: Callable[[str], str | None] = lambda file_id: None,
        file_readers: Callable[[str], dict[str, tuple[str, ...] | None]] | None = None,
    ) -> None:
        self.sharing = sharing
        self._exists, self._check_new_name = store_exists, check_new_name
        self._file_stores, self._file_owner = file_stores, file_owner
        self._file_readers = file_readers or (lambda file_id: dict.fromkeys(file_stores(file_id)))

    def level(self, actor: Actor, store: str) -> Level | None:
        """What ``actor`` may do to ``store``: ``"owner"``, ``"write"``, ``"read"`` or ``None``."""
        return self.sharing.level(actor, store)

    def visible(self, actor: Actor, names: Iterable[str]) -> list[str]:
        """The store ``names`` ``actor`` may see (``store.read``), in their order."""
        names = list(names)
        if actor.local:
            return names
        allowed = self.sharing.levels(actor, names)
        return [n for n in names if n in allowed]

    def allowed(self, actor: Actor, name: str, resource: str | None = None) -> bool:
        """Whether ``actor`` may do action ``name`` (to the store or file id ``resource``)."""
        try:
            self.check(actor, name, resource)
        except (PermissionDenied, StoreNotFound, InvalidArgument):
            return False
        return True

    def check(self, actor: Actor, name: str, resource: str | None = None) -> None:
        """Check that ``actor`` may do action ``name``; ``resource`` is the store's name for a
        ``"store"`` action and the file id for a ``"file"`` action.

        ``store.create`` passes for a store that does not exist yet (with an allowed name; the caller
        makes it and records its owner) and for one the actor owns already; a name taken by a store
        the actor may not see is "not available" (store names are one namespace, said without whose).

        Raises:
            StoreNotFound: the actor may not see the store (the same words as a store that does not
                exist: its name is not confirmed). FileNotFoundError is never raised: a file one may
                not read is ``PermissionDenied`` with the words of a missing file left to the caller.
            PermissionDenied: they see the store but may not do this; an admin action by a member;
                a file they may not read.
            InvalidArgument: ``store.create`` with a name that is taken or not allowed.
            KeyError: no such action.
        """
        act = action(name)
        if actor.local:
            return
        if act.admin and not actor.is_admin:
            raise PermissionDenied(f"Only an admin may {act.refusal}.")
        if act.resource == "store" and resource is not None:
            self._check_store(actor, act, resource)
        elif act.resource == "file" and resource is not None and not self._file_readable(actor, resource):
            raise PermissionDenied(f"{actor.label} may not open the stored file {resource!r}.")

    def _check_store(self, actor: Actor, act: Action, store: str) -> None:
        exists = self._exists(store)
        if act.name == "store.create" and not exists:
            self._check_new_name(store)  # refused now, before anything is recorded for it
            return
        got = self.level(actor, store)
        if got is None:
            if act.name == "store.create":
                raise InvalidArgument(f"The store name {store!r} is not available; choose another.")
            raise StoreNotFound(store, "create it first, or ingest a file into it")
        wanted = act.level or "read"
        if not at_least(got, wanted):
            need = {"write": "change", "owner": "delete, share or re-embed"}.get(wanted, "use")
            raise PermissionDenied(
                f"{actor.label} may not {need} the store {store!r}: it is shared with them"
                f" {'read-only' if got == 'read' else 'to read and write'}."
            )

    def reads(self, actor: Actor, store: str, readers: Iterable[str] | None) -> bool:
        """Whether ``actor``, who may read ``store``, may read a file of it with ``readers``
        (``None``: the file inherits the store's sharing): the store's owners (the local admin, its
        owner, and with ``accounts.admins_see_all`` every admin) read every file of it; anyone else a
        file naming them, or one of their groups. The caller checks ``store.read`` first."""
        if readers is None or actor.local:
            return True
        if self.level(actor, store) == "owner":
            return True
        return not set(principals(actor)).isdisjoint(readers)

    def reader_filter(self, actor: Actor, store: str) -> tuple[str, ...] | None:
        """The principals a search of ``store`` by ``actor`` keeps chunks of (an ``AnyOf`` on the
        chunks' ``readers``), or ``None`` when ``actor`` reads every file of it (its owners)."""
        if actor.local or self.level(actor, store) == "owner":
            return None
        return principals(actor)

    def _file_readable(self, actor: Actor, file_id: str) -> bool:
        return self.reads_stored_file(actor, self._file_readers(file_id), lambda: self._file_owner(file_id))

    def reads_stored_file(
        self,
        actor: Actor,
        readers: Mapping[str, tuple[str, ...] | None],
        owner: Callable[[], str | None],
        seen: Collection[str] | None = None,
    ) -> bool:
        """The rule of ``file.read`` for one stored file, given what it depends on (a page of many
        files reads those once for all): ``readers`` its readers in each store holding it, ``owner``
        who saved it (asked only when no store lets ``actor`` read it), ``seen`` the stores
        ``actor`` may see (read now when ``None``). The local admin reads every file."""
        if actor.local:
            return True
        stores = [s for s in readers if s in seen] if seen is not None else self.visible(actor, readers)
        if any(self.reads(actor, store, readers[store]) for store in stores):
            return True
        return owner() == actor.username


__all__ = [
    "ACTIONS",
    "EVERYONE_READER",
    "MARKED",
    "READER_KINDS",
    "Action",
    "Policy",
    "Resource",
    "action",
    "action_of",
    "checks",
    "describe_readers",
    "parse_readers",
    "principals",
]
