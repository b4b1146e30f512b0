"""Quotas and rate limits: what a person, a group and a store may hold, and how many REST requests a
key may send a minute.

Storage is counted from the catalog's file records (``store_files``: each record's ``size`` and
``chunks``, any status -- a failed file's bytes are kept for its retry): a store's use is its own
records, a person's the records of the stores they own (``store_owners``), a group's those of the
stores its members own. A limit is an admin's override for that person, group or store
(``quota_limits``, migration 20), else the setting (``quotas.user_bytes``, ...); ``0`` and no row
mean unlimited. :meth:`Quotas.check_add` is asked before anything of a write is kept; chunks are
known only once a file is read, so a chunk quota refuses the next file once it is reached, while
bytes and files refuse the write that would pass them.

Requests are counted per key in fixed one-minute windows (:class:`RateCounter`): in this process
(the embedded default), or in the shared catalog's ``rate_windows`` (team mode), so that every API
process counts the same requests.

A part of :mod:`knowledge.people`: imports the ground and its own modules; it reaches the catalog
through its ``cursor()`` only.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from knowledge.config import Settings
from knowledge.errors import InvalidArgument, QuotaExceeded, RateLimited
from knowledge.people.accounts import Cursors, now
from knowledge.people.records import Actor

Scope = Literal["user", "group", "store"]
SCOPES: tuple[Scope, ...] = ("user", "group", "store")
#: What a storage quota counts.
STORAGE = ("bytes", "files", "chunks")
#: Every measure a limit may be set on.
MEASURES = (*STORAGE, "requests_per_minute")
#: Seconds of one rate window.
WINDOW = 60


@dataclass(frozen=True, slots=True)
class Usage:
    """What a person, group or store holds: bytes of its files, its files, its chunks."""

    bytes: int = 0
    files: int = 0
    chunks: int = 0

    def of(self, measure: str) -> int:
        return int(getattr(self, measure))


@dataclass(frozen=True, slots=True)
class Limit:
    """A limit of ``scope`` ``name`` on ``measure``: ``amount`` (``None``: unlimited) and whether an
    admin set it for them (``own``) or it is the setting's."""

    scope: str
    name: str
    measure: str
    amount: int | None
    own: bool = False


@dataclass(frozen=True, slots=True)
class UsageReport:
    """``name``'s use and its limits (``{measure: Limit}``), as My account, People and
    ``GET /v1/usage`` show them."""

    scope: str
    name: str
    usage: Usage
    limits: dict[str, Limit]

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "name": self.name,
            **{m: self.usage.of(m) for m in STORAGE},
            "limits": {m: lim.amount for m, lim in self.limits.items()},
        }


@dataclass(frozen=True, slots=True)
class RateDecision:
    """One request counted: ``used`` requests in this window of ``limit`` (``None``: unlimited), the
    window ending in ``reset`` seconds."""

    allowed: bool
    used: int
    limit: int | None
    reset: int


def human_bytes(n: int) -> str:
    """``n`` bytes as a person reads them (``"1.5 MB"``; 10^3 steps, as ``ingest.max_file_mb``)."""
    size = float(n)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{int(size):,} bytes" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1000
    return f"{n} bytes"  # pragma: no cover


def amount(measure: str, n: int) -> str:
    """``n`` of ``measure`` in words: ``"1.5 MB"``, ``"3 files"``, ``"120 chunks"``."""
    if measure == "bytes":
        return human_bytes(n)
    unit = {"files": "file", "chunks": "chunk", "requests_per_minute": "request"}[measure]
    return f"{n:,} {unit}{'' if n == 1 else 's'}"


class Quotas:
    """The quotas of one catalog.

    Args:
        catalog: the catalog (``cursor()``).
        settings: ``quotas.*``.
        groups_of: ``groups_of(username) -> groups`` (the accounts').
    """

    def __init__(self, catalog: Cursors, settings: Settings, groups_of: Callable[[str], Iterable[str]]) -> None:
        self.catalog = catalog
        self.settings = settings
        self._groups_of = groups_of

    # -- limits ---------------------------------------------------------------------------------
    def default(self, scope: str, measure: str) -> int | None:
        """The setting's limit of ``scope`` on ``measure`` (``None``: unlimited)."""
        key = "api_requests_per_minute" if measure == "requests_per_minute" else f"{scope}_{measure}"
        value = getattr(self.settings.quotas, key, 0)
        return int(value) or None

    def limit(self, scope: str, name: str, measure: str) -> Limit:
        """The limit of ``scope`` ``name`` on ``measure``: an admin's, else the setting's."""
        with self.catalog.cursor() as cur:
            row = cur.execute(
                "SELECT amount FROM quota_limits WHERE scope = ? AND name = ? AND measure = ?", [scope, name, measure]
            ).fetchone()
        if row is not None:
            return Limit(scope, name, measure, int(row[0]) or None, own=True)
        return Limit(scope, name, measure, self.default(scope, measure))

    def limits(self, scope: str, name: str) -> dict[str, Limit]:
        """Every limit of ``scope`` ``name`` (``{measure: Limit}``)."""
        measures = MEASURES if scope == "user" else STORAGE
        return {m: self.limit(scope, name, m) for m in measures}

    def overrides(self) -> list[Limit]:
        """Every limit an admin set, by scope, name and measure."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT scope, name, measure, amount FROM quota_limits ORDER BY scope, name, measure"
            ).fetchall()
        return [Limit(s, n, m, int(a) or None, own=True) for s, n, m, a in rows]

    def set_limit(self, scope: str, name: str, measure: str, value: int | None) -> Limit:
        """Set ``scope`` ``name``'s own limit on ``measure`` to ``value`` (``0``: unlimited);
        ``None`` removes it (the setting's applies again). Returns the limit now in force.

        Raises:
            InvalidArgument: an unknown scope or measure, a negative amount, a rate on a group or store.
        """
        if scope not in SCOPES:
            raise InvalidArgument(f"A quota is set for a user, a group or a store, not {scope!r}.", param="scope")
        allowed = MEASURES if scope == "user" else STORAGE
        if measure not in allowed:
            raise InvalidArgument(
                f"A {scope}'s quota is on {', '.join(allowed)}; got {measure!r}.",
                param="measure",
            )
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise InvalidArgument(f"A limit is a whole number of at least 0 (0: unlimited), got {value!r}.", param="limit")
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM quota_limits WHERE scope = ? AND name = ? AND measure = ?", [scope, name, measure])
            if value is not None:
                cur.execute(
                    "INSERT INTO quota_limits (scope, name, measure, amount, updated) VALUES (?, ?, ?, ?, ?)",
                    [scope, name, measure, value, now()],
                )
        return self.limit(scope, name, measure)

    def forget(self, scope: str, name: str) -> None:
        """Drop every limit an admin set for ``scope`` ``name`` (deleted: a later one of the name
        starts from the settings)."""
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM quota_limits WHERE scope = ? AND name = ?", [scope, name])

    # -- usage ----------------------------------------------------------------------------------
    def store_usage(self, store: str) -> Usage:
        """What ``store``'s file records hold."""
        return self._usage("WHERE store = ?", [store])

    def user_usage(self, username: str) -> Usage:
        """What the stores ``username`` owns hold."""
        return self._usage("WHERE store IN (SELECT store FROM store_owners WHERE owner = ?)", [username])

    def group_usage(self, group: str) -> Usage:
        """What the stores of ``group``'s members hold."""
        return self._usage(
            "WHERE store IN (SELECT o.store FROM store_owners o JOIN group_members g ON g.username = o.owner"
            " WHERE g.group_name = ?)",
            [group],
        )

    def _usage(self, where: str, args: list[Any]) -> Usage:
        with self.catalog.cursor() as cur:
            row = cur.execute(
                f"SELECT coalesce(sum(size), 0), count(*), coalesce(sum(chunks), 0) FROM store_files {where}", args
            ).fetchall()[0]
        return Usage(int(row[0]), int(row[1]), int(row[2]))

    def by_store(self) -> dict[str, Usage]:
        """Every store's use (stores with no file record are left out), with its owner known by
        :meth:`owners`."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT store, coalesce(sum(size), 0), count(*), coalesce(sum(chunks), 0) FROM store_files"
                " GROUP BY store ORDER BY store"
            ).fetchall()
        return {r[0]: Usage(int(r[1]), int(r[2]), int(r[3])) for r in rows}

    def by_user(self) -> dict[str, Usage]:
        """Each owner's use: the sum of the stores they own (owners of no file are left out)."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT o.owner, coalesce(sum(f.size), 0), count(*), coalesce(sum(f.chunks), 0)"
                " FROM store_files f JOIN store_owners o ON o.store = f.store GROUP BY o.owner ORDER BY o.owner"
            ).fetchall()
        return {r[0]: Usage(int(r[1]), int(r[2]), int(r[3])) for r in rows}

    def owners(self) -> dict[str, str]:
        """``{store: owner}`` of every owned store."""
        with self.catalog.cursor() as cur:
            return dict(cur.execute("SELECT store, owner FROM store_owners").fetchall())

    def report(self, scope: str, name: str) -> UsageReport:
        """``name``'s use and limits."""
        return UsageReport(scope, name, self.report_usage(scope, name), self.limits(scope, name))

    # -- the check ------------------------------------------------------------------------------
    def exempt(self, actor: Actor) -> bool:
        """Whether ``actor`` is never refused by a quota (``quotas.admins_exempt`` and an admin)."""
        return self.settings.quotas.admins_exempt and (actor.local or actor.is_admin)

    def check_add(
        self,
        actor: Actor,
        store: str | None,
        owner: str | None,
        *,
        add_bytes: int,
        add_files: int,
        add_chunks: int = 0,
        moved_from: str | None = None,
        even_exempt: bool = False,
    ) -> None:
        """Refuse a write of ``add_files`` files of ``add_bytes`` bytes into ``store`` (owned by
        ``owner``; ``None``: nobody, or the store is new and ``actor``'s) that would take the store,
        its owner or one of the owner's groups past a quota. Asked before anything is kept.
        ``store`` ``None``: an upload of ``actor``'s own not yet in a store (their quotas only).
        ``add_chunks``: the chunks, where they are known before (a bundle's); else a chunk quota
        refuses once it is reached. ``moved_from``: the files leave a store owned by this username
        (a move): that person's use, and their groups', do not grow by them, only ``store``'s.
        ``even_exempt``: ask for an exempt actor too (to warn an admin whose write takes someone
        past a quota).

        Raises:
            QuotaExceeded: the limit, the use and what was asked, in words (nothing written).
        """
        if self.exempt(actor) and not even_exempt:
            return
        holder = owner if owner is not None else (None if actor.local else actor.username)
        asked: list[tuple[str, str]] = [] if store is None else [("store", store)]
        if holder is not None:
            asked.append(("user", holder))
            asked += [("group", g) for g in sorted(self._groups_of(holder))]
        left = set() if moved_from is None else {("user", moved_from), *(("group", g) for g in self._groups_of(moved_from))}
        asked = [a for a in asked if a not in left]
        own = self._own_limits(asked)
        adding = {"bytes": add_bytes, "files": add_files, "chunks": add_chunks}
        for scope, name in asked:
            limits = {m: own.get((scope, name, m), self.default(scope, m)) for m in STORAGE}
            if all(v is None for v in limits.values()):
                continue  # nothing to count (the default: no quota at all)
            use = self.report_usage(scope, name)
            for measure, lim in limits.items():
                if lim is None:
                    continue
                used = use.of(measure)
                over = used >= lim if measure == "chunks" and not add_chunks else used + adding[measure] > lim
                if over:
                    raise QuotaExceeded(
                        _refusal(scope, name, measure, lim, used, adding[measure], actor),
                        scope=scope,
                        name=name,
                        measure=measure,
                        limit=lim,
                        used=used,
                    )

    def report_usage(self, scope: str, name: str) -> Usage:
        """The use of ``scope`` ``name`` (``"user"``, ``"group"`` or ``"store"``)."""
        return {"user": self.user_usage, "group": self.group_usage, "store": self.store_usage}[scope](name)

    def _own_limits(self, asked: list[tuple[str, str]]) -> dict[tuple[str, str, str], int | None]:
        """The limits an admin set for ``asked`` (``(scope, name)`` pairs), in one query:
        ``{(scope, name, measure): amount}`` (``None``: unlimited)."""
        if not asked:
            return {}
        names = sorted({n for _, n in asked})
        marks = ", ".join("?" for _ in names)
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                f"SELECT scope, name, measure, amount FROM quota_limits WHERE name IN ({marks})", names
            ).fetchall()
        wanted = set(asked)
        return {(s, n, m): (int(a) or None) for s, n, m, a in rows if (s, n) in wanted}


def _refusal(scope: str, name: str, measure: str, lim: int, used: int, adding: int, actor: Actor) -> str:
    whose = {
        "store": f"The store {name!r}",
        "user": "Your stores" if name == actor.username else f"The stores of {name}",
        "group": f"The stores of the group {name}",
    }[scope]
    hold = "holds" if scope == "store" else "hold"
    if measure == "chunks" and not adding:
        head = f"{whose} {hold} {amount(measure, used)}: the quota of {amount(measure, lim)} is reached"
    else:
        head = (
            f"{whose} {hold} {amount(measure, used)}; the quota is {amount(measure, lim)}, and adding"
            f" {amount(measure, adding)} would pass it"
        )
    return f"{head}. Nothing was added. Delete files, or ask an admin to raise the quota."


class RateCounter:
    """Requests per key in fixed one-minute windows.

    Args:
        catalog: the catalog; used when ``shared`` (team mode: every API process counts in
            ``rate_windows``), else the counts are this process's.
        shared: count in the catalog.
        clock: seconds since the epoch (tests hand their own).
    """

    def __init__(self, catalog: Cursors, *, shared: bool, clock: Callable[[], float] = time.time) -> None:
        self.catalog, self.shared, self.clock = catalog, shared, clock
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int], int] = {}

    def hit(self, bucket: str, limit: int | None) -> RateDecision:
        """Count one request of ``bucket`` (a key's digest) against ``limit`` per minute (``None``:
        unlimited, nothing counted)."""
        t = self.clock()
        start = int(t // WINDOW) * WINDOW
        reset = max(1, math.ceil(start + WINDOW - t))
        if limit is None:
            return RateDecision(True, 0, None, reset)
        if self.shared:
            with self.catalog.cursor() as cur:
                used = cur.execute(
                    "INSERT INTO rate_windows (bucket, window_start, requests) VALUES (?, ?, 1)"
                    " ON CONFLICT (bucket, window_start) DO UPDATE SET requests = rate_windows.requests + 1"
                    " RETURNING requests",
                    [bucket, start],
                ).fetchall()[0][0]
                if used == 1:  # a new window: the old ones of this key go
                    cur.execute("DELETE FROM rate_windows WHERE bucket = ? AND window_start < ?", [bucket, start])
        else:
            with self._lock:
                for k in [k for k in self._counts if k[1] < start]:
                    del self._counts[k]
                used = self._counts[(bucket, start)] = self._counts.get((bucket, start), 0) + 1
        return RateDecision(int(used) <= limit, int(used), limit, reset)


def rate_refusal(decision: RateDecision) -> RateLimited:
    """The error of a request over its key's rate."""
    return RateLimited(
        f"This key sent {decision.used:,} requests this minute, over its limit of {decision.limit:,} a minute."
        f" Try again in {decision.reset} seconds (the count starts again then).",
        limit=decision.limit or 0,
        used=decision.used,
        retry_after=decision.reset,
    )


__all__ = [
    "MEASURES",
    "SCOPES",
    "STORAGE",
    "WINDOW",
    "Limit",
    "Quotas",
    "RateCounter",
    "RateDecision",
    "Usage",
    "UsageReport",
    "amount",
    "human_bytes",
    "rate_refusal",
]
