"""Agent memory: datasets, remember, recall with filters, forget (knowledge.agent_memory.VectorMemory)."""

from __future__ import annotations

import json

import streamlit as st

from knowledge.agent_memory import DEFAULT_COLLECTION, DEFAULT_DATASET, VectorMemory, user_collection
from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.pagemodels.playground import parse_scalar
from knowledge.text.render import inert, md
from knowledge.vectorstore.registry import backend_names
from knowledge.workbench import Workbench
from pages._ui import app_workbench, flash, set_flash
from pages.widgets import confirm

wb: Workbench = app_workbench()
ALL = "(all datasets)"

st.title("🧠 Agent memory")
st.caption(
    "What agents remember: short texts embedded into one store, grouped in datasets, recalled "
    "by meaning (semantic search). The same API from Python: `knowledge.agent_memory.VectorMemory`."
)


def parse_payload(raw: str) -> dict:
    """The extra fields typed as JSON. Raises InvalidArgument pointing at the error: where it is
    (line, column) and the text around it with a marker."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        line = raw.splitlines()[exc.lineno - 1] if raw.splitlines() else raw
        col = exc.colno - 1
        excerpt = (line[max(0, col - 30) : col] + " ⟶ " + line[col : col + 30]).strip()
        raise InvalidArgument(
            f"The extra fields are not valid JSON: {exc.msg.lower()} at line {exc.lineno}, column {exc.colno}"
            f' (here: `{excerpt}`). Write a JSON object, e.g. {{"topic": "billing"}}.'
        ) from None
    if not isinstance(value, dict):
        raise InvalidArgument(
            'The extra fields must be a JSON object, e.g. {"topic": "billing"}, '
            f"not {type(value).__name__ if not isinstance(value, list) else 'a list'}."
        )
    return value


def parse_id(raw: str):
    raw = raw.strip()
    if not raw:
        return None
    return int(raw) if raw.lstrip("-").isdigit() else raw


backends = backend_names()
default_backend = wb.settings.vector_store.backend
c1, c2 = st.columns(2)
WHERE = {"memory": "on this computer", "pgvector": "PostgreSQL (pgvector)", "qdrant": "Qdrant"}
backend_name = c1.selectbox(
    "Stored",
    backends,
    index=backends.index(default_backend) if default_backend in backends else 0,
    key="mem_backend",
    format_func=lambda b: WHERE.get(b, b),
    help="Where the memories are kept (the backend: " + ", ".join(backends) + ").",
)
collection = c2.text_input(
    "Memory store",
    DEFAULT_COLLECTION,
    key="mem_collection",
    help="One store holds every dataset; two embedding models need two stores.",
)

# Signed in by account, a person's memories are their own: a collection of theirs
# (knowledge.agent_memory.user_collection), never a store's or another person's.
owner = None if wb.actor.local else wb.actor.username
if owner is not None:
    st.caption("Your memories are private: nobody else signed in recalls, counts or forgets them.")
try:
    actual = user_collection(collection or DEFAULT_COLLECTION, owner)
    if owner is not None and wb.collection_in_use(actual):
        raise InvalidArgument(f"{collection!r} cannot hold memories: a vector store uses that name. Choose another.")
    memory = VectorMemory(wb.backend(backend_name), wb.embedder(), collection=actual)
    datasets = memory.datasets()
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()

st.subheader("Datasets")
if datasets:
    st.dataframe(
        [{"dataset": name, "memories": n} for name, n in datasets.items()],
        hide_index=True,
        width="stretch",
        key="mem_datasets",
    )
    total = sum(datasets.values())
    st.caption(
        md(
            "{} memor{} in **{}**, {}, embedded with {}.",
            total,
            "y" if total == 1 else "ies",
            collection,
            WHERE.get(backend_name, backend_name),
            wb.embedder().name,
        )
    )
else:
    st.info("No memories yet. Remember something below.")

st.subheader("Remember")
if st.session_state.pop("mem_clear", False):  # after a success: an empty form (kept as typed on an error)
    for key in ("mem_text", "mem_id", "mem_payload"):
        st.session_state[key] = ""
with st.form("mem_remember_form"):
    text = st.text_area("Text", key="mem_text")
    r1, r2 = st.columns(2)
    dataset = r1.text_input("Dataset", DEFAULT_DATASET, key="mem_dataset")
    mem_id = r2.text_input("Id (optional; the same id overwrites)", key="mem_id")
    payload_raw = st.text_input(
        "Extra fields (JSON object, optional)",
        key="mem_payload",
        placeholder='{"topic": "billing"}',
        help="Stored with the memory as its payload; recall and forget can filter on them.",
    )
    if st.form_submit_button("Remember", type="primary"):
        try:
            new_id = memory.remember(text, dataset=dataset or None, payload=parse_payload(payload_raw), id=parse_id(mem_id))
        except KnowledgeError as exc:
            st.error(inert(exc))
        else:
            set_flash("mem:remember", True, f"Remembered {new_id} in the dataset {dataset or DEFAULT_DATASET}.")
            st.session_state["mem_clear"] = True
            st.rerun()
flash("mem:remember")

st.subheader("Recall")
query = st.text_input("Query", key="mem_query", placeholder="what did the customer ask for?")
f1, f2, f3 = st.columns(3)
choices = [ALL, *datasets] if DEFAULT_DATASET in datasets else [ALL, DEFAULT_DATASET, *datasets]
# start where the memories are: `default` when it holds some, the one dataset there is, else all of them
start_at = DEFAULT_DATASET if datasets.get(DEFAULT_DATASET) else next(iter(datasets)) if len(datasets) == 1 else ALL
recall_dataset = f1.selectbox(
    "Dataset",
    choices,
    index=choices.index(start_at),
    key="mem_recall_dataset",
    help="Where to recall from; each hit names its dataset.",
)
limit = f2.number_input("Limit", min_value=1, max_value=100, value=5, key="mem_limit")
use_threshold = f3.checkbox("Score threshold", key="mem_use_threshold")
threshold = f3.number_input("Lowest similarity kept", value=0.3, step=0.05, key="mem_threshold", disabled=not use_threshold)
w1, w2 = st.columns(2)
where_key = w1.text_input(
    "Extra field (optional)",
    key="mem_where_key",
    placeholder="topic",
    help="Only memories whose payload field has this value.",
)
where_value = w2.text_input("equals", key="mem_where_value", placeholder="billing")

if st.button("Recall", key="mem_recall", type="primary"):
    where = {where_key.strip(): parse_scalar(where_value)} if where_key.strip() else None
    try:
        if not query.strip():
            raise InvalidArgument("Type what to recall first.")
        st.session_state["mem_hits_of"] = (backend_name, collection)
        st.session_state["mem_hits"] = memory.recall(
            query,
            limit=int(limit),
            dataset=None if recall_dataset == ALL else recall_dataset,
            score_threshold=float(threshold) if use_threshold else None,
            where=where,
        )
    except KnowledgeError as exc:
        st.session_state.pop("mem_hits", None)
        st.error(inert(exc))

hits = st.session_state.get("mem_hits")
if st.session_state.get("mem_hits_of") != (backend_name, collection):
    hits = None  # results of another store are not shown under this one
if hits is not None:
    if not hits:
        st.warning("Nothing recalled. Try another dataset, loosen the filter or lower the threshold.")
    for rank, hit in enumerate(hits, 1):
        with st.container(border=True):
            st.markdown(md("**{}.** {}", rank, hit.text))
            st.caption(md("similarity {:.3f} · from the dataset **{}** · id {}", hit.score, hit.dataset, hit.id))
            if hit.payload:
                st.json(hit.payload, expanded=False)
            if st.button("Forget", key=f"mem_forget_hit_{hit.id}"):
                try:
                    memory.forget(ids=[hit.id])
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    st.session_state["mem_hits"] = [h for h in hits if h.id != hit.id]
                    set_flash("mem:recall", True, f"Forgot {hit.id}.")
                    st.rerun()
flash("mem:recall")

# -- Browse: a dataset's memories, a page at a time, each with a Forget ----------------------------
BROWSE_PAGE = 20
st.subheader("Browse")
if not datasets:
    st.caption("Nothing to browse yet.")
else:
    b1, b2 = st.columns([3, 1])
    browse_choices = [ALL, *datasets]
    browse_dataset = b1.selectbox(
        "Dataset", browse_choices, key="mem_browse_dataset", format_func=lambda d: d if d == ALL else f"{d} ({datasets[d]})"
    )
    in_view = sum(datasets.values()) if browse_dataset == ALL else datasets.get(browse_dataset, 0)
    pages = max(1, -(-in_view // BROWSE_PAGE))
    page_no = int(b2.number_input(f"Page (of {pages})", min_value=1, max_value=pages, value=1, key="mem_browse_page"))
    try:
        rows = memory.browse(
            None if browse_dataset == ALL else browse_dataset, offset=(page_no - 1) * BROWSE_PAGE, limit=BROWSE_PAGE
        )
    except KnowledgeError as exc:
        st.error(inert(exc))
        rows = []
    if rows:
        first = (page_no - 1) * BROWSE_PAGE + 1
        st.caption(f"Memories {first}–{first + len(rows) - 1} of {in_view}.")
        st.dataframe(
            [
                {
                    "text": r.text,
                    "when": (r.remembered_at or "").replace("T", " ").replace("+00:00", " UTC"),
                    "dataset": r.dataset,
                    "extra fields": json.dumps(r.payload, ensure_ascii=False) if r.payload else "",
                    "id": str(r.id),
                }
                for r in rows
            ],
            hide_index=True,
            width="stretch",
            key="mem_browse_table",
            column_config={"text": st.column_config.TextColumn(width="large")},
        )
        d1, d2 = st.columns([3, 1], vertical_alignment="bottom")
        by_id = {str(r.id): r for r in rows}
        pick = d1.selectbox(
            "Memory",
            list(by_id),
            key="mem_browse_pick",
            format_func=lambda i: f"{by_id[i].text[:60]}{'…' if len(by_id[i].text) > 60 else ''} ({i})",
        )
        if d2.button("Forget it", key="mem_browse_forget", width="stretch"):
            try:
                memory.forget(ids=[by_id[pick].id])
            except KnowledgeError as exc:
                st.error(inert(exc))
            else:
                st.session_state.pop("mem_hits", None)
                set_flash("mem:browse", True, f"Forgot {pick}.")
                st.rerun()
    else:
        st.caption("No memories on this page.")
flash("mem:browse")

st.subheader("Forget")
by = st.radio("Forget by", ["ids", "dataset", "where"], horizontal=True, key="mem_forget_by")
if by == "ids":
    target_ids = st.text_input("Ids (comma-separated)", key="mem_forget_ids")
elif by == "dataset":
    target_dataset = st.selectbox("Dataset", list(datasets) or [DEFAULT_DATASET], key="mem_forget_dataset")
else:
    g1, g2 = st.columns(2)
    forget_key = g1.text_input("Extra field", key="mem_forget_key", help="A payload field of the memories.")
    forget_value = g2.text_input("equals", key="mem_forget_value")
if by == "ids":
    what = md("the memories with the ids {}", target_ids.strip() or "(none given)")
elif by == "dataset":
    what = md("every memory of the dataset **{}** ({})", target_dataset, datasets.get(target_dataset, 0))
else:
    what = md("every memory whose {} is {!r}", forget_key.strip() or "(field)", forget_value)
if confirm(
    "Forget", "mem_forget", f"Forget {what} in " + md("**{}**? This cannot be undone.", collection), yes="Yes, forget"
):
    try:
        if by == "ids":
            n = memory.forget(ids=[parse_id(i) for i in target_ids.split(",") if i.strip()])
        elif by == "dataset":
            n = memory.forget(dataset=target_dataset)
        else:
            if not forget_key.strip():
                raise InvalidArgument("Name the extra (payload) field to forget by.")
            n = memory.forget(where={forget_key.strip(): parse_scalar(forget_value)})
    except KnowledgeError as exc:
        st.error(inert(exc))
    else:
        st.session_state.pop("mem_hits", None)
        set_flash("mem:forget", True, f"Forgot {n} {'memory' if n == 1 else 'memories'}.")
        st.rerun()
flash("mem:forget")
