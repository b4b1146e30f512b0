"""Who may use which store: each store's owner, and the grants that share it with a user, a group
or everyone, read-only or read and write. :meth:`Sharing.level` is the one decision every path asks."""

from __future__ import annotations

from collections.abc import Iterable

from knowledge.errors import InvalidArgument
from knowledge.people.accounts import Cursors
from knowledge.people.records import GRANT_KINDS, Actor, Grant, Level


class Sharing:
    """Owners and grants of one catalog's stores. Thread-safe.

    Args:
        catalog: the catalog.
        admins_see_all: setting ``accounts.admins_see_all`` (an admin is owner of every store).
    """

    def __init__(self, catalog: Cursors, *, admins_see_all: bool = True) -> None:
        self.catalog, self.admins_see_all = catalog, admins_see_all
        self._cached: tuple[object, dict[str, str], list[Grant]] | None = None

    def _snapshot(self) -> tuple[dict[str, str], list[Grant]]:
        """Owners and grants, read again only after the catalog changed (its ``change_token``)."""
        token_of = getattr(self.catalog, "change_token", None)
        token = token_of() if token_of is not None else object()
        cached = self._cached
        if cached is not None and cached[0] == token:
            return cached[1], cached[2]
        owners, grants = self.owners(), self.grants()
        self._cached = (token, owners, grants)
        return owners, grants

    def owner(self, store: str) -> str | None:
        """The username owning ``store`` (``None``: made before accounts existed; admins only)."""
        with self.catalog.cursor() as cur:
            row = cur.execute("SELECT owner FROM store_owners WHERE store = ?", [store]).fetchone()
        return row[0] if row else None

    def owners(self) -> dict[str, str]:
        """``{store: owner}`` of every store that has one."""
        with self.catalog.cursor() as cur:
            return dict(cur.execute("SELECT store, owner FROM store_owners").fetchall())

    def set_owner(self, store: str, username: str) -> None:
        self._cached = None
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO store_owners (store, owner) VALUES (?, ?)"
                " ON CONFLICT (store) DO UPDATE SET owner = excluded.owner",
                [store, username],
            )

    def grants(self, store: str | None = None) -> list[Grant]:
        """The grants of ``store`` (``None``: of every store)."""
        where, args = ("WHERE store = ?", [store]) if store is not None else ("", [])
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                f"SELECT store, kind, principal, level FROM store_grants {where} ORDER BY store, kind, principal", args
            ).fetchall()
        return [Grant(*r) for r in rows]

    def share(self, store: str, kind: str, principal: str, level: str) -> Grant:
        """Share ``store`` with a user, a group or everyone (``principal`` ``""``), at ``read`` or
        ``write``; a grant to the same principal is replaced.

        Raises:
            InvalidArgument: a bad kind or level, or no principal for a user or group.
        """
        self._cached = None
        if kind not in GRANT_KINDS:
            raise InvalidArgument(f"{kind!r}: share with a user, a group or everyone.")
        if level not in ("read", "write"):
            raise InvalidArgument(f"{level!r}: share to read, or to read and write.")
        principal = "" if kind == "everyone" else (principal or "").strip()
        if kind != "everyone" and not principal:
            raise InvalidArgument(f"Name the {kind} to share with.")
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO store_grants (store, kind, principal, level) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (store, kind, principal) DO UPDATE SET level = excluded.level",
                [store, kind, principal, level],
            )
        return Grant(store, kind, principal, level)  # type: ignore[arg-type]

    def unshare(self, store: str, kind: str, principal: str) -> bool:
        self._cached = None
        with self.catalog.cursor() as cur:
            return bool(
                cur.execute(
                    "DELETE FROM store_grants WHERE store = ? AND kind = ? AND principal = ? RETURNING store",
                    [store, kind, "" if kind == "everyone" else principal],
                ).fetchall()
            )

    def forget(self, store: str) -> None:
        """A deleted store: its owner and grants go."""
        self._cached = None
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM store_grants WHERE store = ?", [store])
            cur.execute("DELETE FROM store_owners WHERE store = ?", [store])

    def rename(self, old: str, new: str) -> None:
        self._cached = None
        with self.catalog.cursor() as cur:
            cur.execute("UPDATE store_grants SET store = ? WHERE store = ?", [new, old])
            cur.execute("UPDATE store_owners SET store = ? WHERE store = ?", [new, old])

    def hand_over(self, username: str, heir: str) -> list[str]:
        """Every store ``username`` owns becomes ``heir``'s, and their grants to ``username`` go;
        returns the stores handed over."""
        self._cached = None
        with self.catalog.cursor() as cur:
            stores = [
                r[0]
                for r in cur.execute("SELECT store FROM store_owners WHERE owner = ? ORDER BY store", [username]).fetchall()
            ]
            cur.execute("UPDATE store_owners SET owner = ? WHERE owner = ?", [heir, username])
            cur.execute("DELETE FROM store_grants WHERE kind = 'user' AND principal = ?", [username])
        return stores

    def forget_group(self, group: str) -> None:
        """A deleted group: its grants go."""
        self._cached = None
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM store_grants WHERE kind = 'group' AND principal = ?", [group])

    # -- the decision ---------------------------------------------------------------------------
    def level(self, actor: Actor, store: str) -> Level | None:
        """What ``actor`` may do to ``store``: ``owner``, ``write``, ``read`` or ``None`` (nothing: the
        store is not even listed). The local admin and, with ``admins_see_all``, every admin own
        everything; a store without an owner is the admins'; otherwise the owner, then the best grant
        naming the user, one of their groups, or everyone."""
        if actor.local or (actor.is_admin and self.admins_see_all):
            return "owner"
        return self.levels(actor, [store]).get(store)

    def levels(self, actor: Actor, stores: Iterable[str]) -> dict[str, Level]:
        """``{store: level}`` for the ``stores`` ``actor`` may use at all (one catalog read)."""
        names = list(stores)
        if actor.local or (actor.is_admin and self.admins_see_all):
            return dict.fromkeys(names, "owner")
        owners, grants = self._snapshot()
        out: dict[str, Level] = {}
        rank = {"read": 1, "write": 2}
        for g in grants:
            named = (
                g.kind == "everyone"
                or (g.kind == "user" and g.principal == actor.username)
                or (g.kind == "group" and g.principal in actor.groups)
            )
            if named and rank[g.level] > rank.get(out.get(g.store, ""), 0):
                out[g.store] = g.level
        for s, o in owners.items():
            if o == actor.username:
                out[s] = "owner"
        if actor.is_admin:  # a store made before accounts existed is the admins'
            out.update({s: "owner" for s in names if s not in owners})
        return {s: out[s] for s in names if s in out}
