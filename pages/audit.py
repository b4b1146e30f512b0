"""Audit: who did what, when (UTC), newest first, 100 events a page (read after the last one's id),
filtered by person, action, store and time, and exported as CSV (the page shown). An admin sees every
event; a member the events of the stores they may see now and those of their own account (a private
store of someone else never shows here)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, time

import streamlit as st

from knowledge.people import ACTION_WORDS
from knowledge.people.accounts import source_label
from knowledge.people.quotas import MEASURES, amount
from knowledge.workbench import Workbench
from pages._ui import app_workbench, utc

wb: Workbench = app_workbench()
me = wb.actor

st.title("📜 Audit")
sees_all = me.local or me.is_admin
st.caption(
    "Every event, newest first."
    if sees_all
    else "The events of the stores you may use now, and of your own account, newest first."
)
people = {u.username: u.display_name for u in wb.directory()}
visible = wb.store_names()

c1, c2, c3, c4 = st.columns(4)
person = c1.selectbox(
    "Person", ["", *people], format_func=lambda u: people.get(u, u) if u else "everyone", key="audit-person"
)
kinds = {
    "": "every action",
    "store.": "stores",
    "file.": "files",
    "user.": "accounts",
    "key.": "API keys",
    "group.": "groups",
    "settings.": "settings",
    "quota.": "quotas",
    "batch.": "batches",
    "scim.": "provisioning (SCIM)",
    **ACTION_WORDS,
}
action = c2.selectbox("Action", list(kinds), format_func=lambda a: kinds.get(a, a), key="audit-action")
store = c3.selectbox("Store", ["", *visible], format_func=lambda s: s or "any store", key="audit-store")
since = c4.date_input("Since (UTC)", value=None, key="audit-since")


def in_words(value: object) -> str:
    """One detail value as people read it: yes/no, a time in UTC to the second (the catalog keeps
    ISO 8601 with microseconds), a list joined by commas, anything else as written."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(in_words(v) for v in value)
    if isinstance(value, str) and len(value) >= 19 and value[4:5] == "-" and value[10:11] == "T":
        try:
            return utc(datetime.fromisoformat(value), seconds=True)
        except ValueError:
            return value
    return str(value)


def detail(action: str, values: dict) -> str:
    """An event's detail in words: ``group.member`` as "added to <group>" / "removed from <group>"
    (then "(from <provider>)" when a provider set it); ``quota.set`` as "bytes: 1.0 MB";
    other actions as ``key: value`` pairs (:func:`in_words`) separated by ``;``."""
    if action == "group.member" and "group" in values and "added" in values:
        words = f"{'added to' if values['added'] else 'removed from'} {values['group']}"
        return f"{words} (from {source_label(str(values['source']))})" if values.get("source") else words
    if action == "quota.set" and values.get("measure") in MEASURES:
        measure, limit = str(values["measure"]), values.get("limit")
        what = {"requests_per_minute": "API requests a minute"}.get(measure, measure)
        if limit is None:
            return f"{what}: back to the setting's quota"
        return f"{what}: {'unlimited' if not limit else amount(measure, int(limit))}"
    return "; ".join(f"{k.replace('_', ' ')}: {in_words(v)}" for k, v in values.items())


def cell(value: str) -> str:
    """A CSV cell a spreadsheet shows as text: a value starting ``= + - @`` (a formula) gets a ``'``."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


#: Events a page of the trail shows; the next page is read after the last one's id (a keyset).
PAGE_EVENTS = 100
version = repr((person, action, store, since))
kept = st.session_state.get("audit-pages")
starts: list[str | None] = kept[1] if isinstance(kept, tuple) and kept[0] == version else [None]
events = wb.audit_events(
    actor=person or None,
    action=action or None,
    store=store or None,
    since=datetime.combine(since, time(), UTC) if since else None,
    limit=PAGE_EVENTS + 1,  # one more: is there an older page?
    before=starts[-1],
)
older = len(events) > PAGE_EVENTS
events = events[:PAGE_EVENTS]
rows = [
    {
        "time": utc(e.at, seconds=True),
        "who": people.get(e.actor, e.actor),
        "what": ACTION_WORDS.get(e.action, e.action),
        "store": e.store or "",
        "target": e.target or "",
        "detail": detail(e.action, e.detail),
    }
    for e in events
]
if not rows:
    st.info("No events match.")
else:
    st.dataframe(rows, hide_index=True, width="stretch")
    first = (len(starts) - 1) * PAGE_EVENTS
    if older or len(starts) > 1:
        c1, c2, c3 = st.columns([1, 3, 1], vertical_alignment="center")
        c1.button(
            "◀ Newer",
            key="audit-newer",
            disabled=len(starts) == 1,
            on_click=lambda: st.session_state.__setitem__("audit-pages", (version, starts[:-1])),
            width="stretch",
        )
        c2.caption(f"Events {first + 1:,}–{first + len(events):,}, newest first")
        c3.button(
            "Older ▶",
            key="audit-older",
            disabled=not older,
            on_click=lambda: st.session_state.__setitem__("audit-pages", (version, [*starts, events[-1].id])),
            width="stretch",
        )
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["time", "who", "username", "action", "what", "store", "target", "detail"])
    writer.writeheader()
    for e, row in zip(events, rows, strict=True):
        writer.writerow(
            {k: cell(str(v)) for k, v in {**row, "username": e.actor, "action": e.action}.items()}
            | {"time": e.at.astimezone(UTC).isoformat() if e.at.tzinfo else e.at.isoformat()}
        )
    st.download_button(
        "Export as CSV",
        out.getvalue().encode("utf-8"),
        file_name="knowledge-audit.csv",
        mime="text/csv",
        key="audit-csv",
    )
