"""Search playground: query a store, see scores, provenance and the matching text; filter; compare; map."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.pagemodels import playground as pg
from knowledge.pagemodels import storemap
from knowledge.pagemodels import viewer as vm
from knowledge.text import render
from knowledge.text.highlight import escape_markdown, highlight, snippet
from knowledge.text.render import inert, md
from knowledge.text.tables import table_preview
from knowledge.workbench import Workbench
from pages._ui import app_workbench

wb: Workbench = app_workbench()
NO_COMPARE, ALL_FILES = "(none)", "(all files)"
# Widget values live under these keys; a copy in "playground" survives navigating to another page.
KEYS = ("pg_store", "pg_query", "pg_k", "pg_threshold", "pg_file", "pg_fields", "pg_compare", "pg_map", "pg_mode")
saved: dict = st.session_state.setdefault("playground", {})

st.title("🔎 Search playground")
st.caption("Query a store and see what comes back: scores, provenance and the matching text.")

try:
    stores = [s.record.name for s in wb.list_stores()]
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()

if not stores:
    st.info(
        "No vector stores yet. Go to **Vector stores** to create a store and upload files, "
        "then come back here to search them."
    )
    st.page_link("pages/stores.py", label="Open Vector stores", icon="🗂️")
    st.stop()

valid = {"pg_store": stores, "pg_compare": [NO_COMPARE, *stores]}
for key in KEYS:  # restore what was there before navigating away
    if key not in st.session_state and key in saved and saved[key] in valid.get(key, [saved[key]]):
        st.session_state[key] = saved[key]
# A link can carry a search: /search?store=NAME&q=QUERY&compare=NAME (used on the first visit only).
for param, key in (("store", "pg_store"), ("q", "pg_query"), ("compare", "pg_compare")):
    value = st.query_params.get(param)
    if value and key not in st.session_state and value in valid.get(key, [value]):
        st.session_state[key] = value


def render_hits(run: pg.SearchRun) -> None:
    """One bordered box per hit: provenance, score bar (in the order of the list), a snippet of the
    readable text with the query's words marked (for a chunk holding a table, the table's header
    and the rows holding the query's words, as a table), the full readable text on expand."""
    if not run.hits:
        if not run.top and run.where:  # the filters, not the store, left nothing (a mistyped field, say)
            st.warning(
                md(
                    "No chunk of **{}** matches the filters ({}). Check the field names and values"
                    " (Filters: the fields in this store are listed there).",
                    run.store,
                    ", ".join(f"{k} = {v!r}" for k, v in run.where.items()),
                )
            )
            return
        if not run.top and run.mode == "lexical":  # keyword ranking: only chunks sharing a word come back
            st.info(md("No chunk of **{}** holds a word of this query. Try other words, or rank by meaning.", run.store))
            return
        if not run.top:
            st.info(md("**{}** has no chunks yet: drop files on it (Vector stores page).", run.store))
            return
        if run.nothing_matched_well:
            st.warning(
                md(
                    "Nothing in **{}** matched this query well: the closest chunk scores "
                    "a similarity of {:.2f}, short of the score threshold {:.2f}. Try other words, or clear "
                    "the threshold to see the closest chunks anyway.",
                    run.store,
                    run.best_top_score,
                    run.threshold,
                ),
                icon="🤷",
            )
            return
        st.warning(md("No chunk of **{}** matches. Loosen the filters.", run.store))
        return
    for rank, hit in enumerate(run.hits, 1):
        note = run.note(hit)
        with st.container(border=True):
            st.markdown(f"**{rank}.** {escape_markdown(pg.provenance(hit, note))}", unsafe_allow_html=True)
            if note.also_in:
                st.caption(md("Identical text also in: {}", ", ".join(note.also_in)))
            origin = pg.source_of(hit)
            if origin is not None:  # synced from a share, a repository, a mailbox, ...: where it lives there
                st.caption(md("🔌 From the source **{}**: {}", origin[0], origin[1]))
            st.progress(pg.bar_fraction(hit, run), text=pg.score_text(hit, run.distance))
            table = table_preview(hit.text, run.query, pipe_rows=not render.is_markdown(hit.file_name, hit.text))
            if table is not None:  # a table hit: its header and the rows holding the query's words
                st.markdown(table, unsafe_allow_html=True)
            else:
                readable = render.plain_text(hit.text, file_name=hit.file_name)
                st.markdown(highlight(snippet(readable, run.query), run.query), unsafe_allow_html=True)
            st.markdown("📄 " + vm.viewer_link(vm.hit_viewer_url(run.store, hit)))
            with st.expander("Full text" if len(note.chunks) > 1 else "Full chunk"):
                st.markdown(render.render_html(hit.text, run.query, file_name=hit.file_name), unsafe_allow_html=True)
                if hit.metadata:
                    st.caption("Extra fields")
                    st.json(hit.metadata, expanded=False)


def render_summary(run: pg.SearchRun) -> None:
    shown = f"{len(run.hits)} result{'' if len(run.hits) == 1 else 's'}"
    order = (
        f" Order: {pg.RERANK_SCORE} (the best passages reranked)."
        if any(h.rerank_score is not None for h in run.hits)
        else pg.MODE_NOTE.get(run.mode, "")
    )
    st.caption(
        md("**{}**: ", run.store) + f"{shown} in {run.total_ms:.0f} ms.{order}",
        help=f"Embedding the query {run.embed_ms:.0f} ms + {pg.MODES.get(run.mode, run.mode)} search "
        f"{run.search_ms:.0f} ms. "
        f"Similarity: {pg.score_meaning(run.distance)}. Overlapping chunks of one file are "
        "shown as one result (setting search.merge_overlapping). " + pg.MODE_HELP,
    )


def render_distribution(run: pg.SearchRun) -> None:
    rows = pg.distribution_rows(run)
    if not rows:
        return
    data = pd.DataFrame(rows)
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("rank:O", title="rank"),
            y=alt.Y("score:Q", title="similarity"),
            color=alt.Color(
                "result:N",
                title=None,
                scale=alt.Scale(domain=[pg.SHOWN_LABELS[True], pg.SHOWN_LABELS[False]], range=["#e45756", "#bab0ac"]),
                legend=alt.Legend(orient="bottom", labelLimit=400),
            ),
            tooltip=["rank", alt.Tooltip("score:Q", format=".3f"), "file"],
        )
    )
    chart = bars
    if run.threshold is not None:
        rule = alt.Chart(pd.DataFrame({"threshold": [run.threshold]})).mark_rule(strokeDash=[4, 4]).encode(y="threshold:Q")
        chart = bars + rule
    title = f"Similarity of the {len(rows)} best-ranked chunk{'' if len(rows) == 1 else 's'}"
    st.altair_chart(chart.properties(height=220, title=title), width="stretch")
    if not all(r["shown"] for r in rows):
        st.caption("Not shown: under the score threshold, overlapping a shown chunk, or past k.")


@st.cache_data(show_spinner="Projecting the store's vectors...", max_entries=8)
def cached_map(store: str, version: tuple) -> storemap.StoreMap:
    """The map depends on the store's contents (``version``); a search's hits are added to it."""
    return storemap.store_map(wb.vector_store(store))


def render_map(run: pg.SearchRun) -> None:
    smap = storemap.with_points(
        cached_map(run.store, storemap.store_version(wb, run.store)), wb.vector_store(run.store), [h.id for h in run.hits]
    )
    rows = pg.map_rows(smap, run)
    if not rows:
        st.caption("Nothing to map yet.")
        return
    data = pd.DataFrame(rows)
    few_files = data["file"].nunique() <= 20  # the query is one "file" too; tableau20 has 20 distinct colours
    base = alt.Chart(data).encode(
        x=alt.X("x:Q", title=None, axis=alt.Axis(labels=False), scale=alt.Scale(zero=False, padding=14)),
        y=alt.Y("y:Q", title=None, axis=alt.Axis(labels=False), scale=alt.Scale(zero=False, padding=14)),
        tooltip=["file", "page", "chunk", "rank", "text"],  # the full file name, where the legend has a short one
    )
    # The legend: below the chart, one column of short names (storemap.short_names), so it fits
    # the map's column at 1280 px and a 390 px phone; the chart's width follows its column.
    chunks = (
        base.transform_filter(alt.datum.role != "query")
        .mark_circle(size=40, opacity=0.55)
        .encode(
            color=alt.Color(
                "label:N",
                title="file",
                scale=alt.Scale(scheme="tableau20"),
                legend=alt.Legend(
                    orient="bottom", direction="vertical", columns=1, labelLimit=0, columnPadding=8, symbolSize=60
                )
                if few_files
                else None,
            )
        )
    )
    hits = base.transform_filter(alt.datum.role == "hit").mark_point(size=160, filled=False, color="black", strokeWidth=2)
    labels = base.transform_filter(alt.datum.role == "hit").mark_text(dx=9, dy=-9, color="black").encode(text="rank:Q")
    query = base.transform_filter(alt.datum.role == "query").mark_point(
        shape="cross", size=300, filled=True, color="#d62728"
    )
    legend_rows = data["label"].nunique() if few_files else 0  # the chart's height holds the legend too
    st.altair_chart(
        (chunks + hits + labels + query).properties(height=320 + 18 * legend_rows).interactive(), width="stretch"
    )
    sample = f"a sample of {len(smap.rows)} of {smap.total}" if smap.sampled else f"all {smap.total}"
    ex = smap.projection.explained if smap.projection else (0.0, 0.0)
    st.caption(
        f"Map of the store, {sample} chunks: colour = file{'' if few_files else ' (hover a point for its name)'}, "
        "circled = the results with their rank, red cross = the query. Near on the map is a rough hint "
        "of semantic similarity.",
        help=f"A PCA projection of the stored vectors onto their two main directions, which hold "
        f"{ex[0] + ex[1]:.0%} of the variance.",
    )


# -- the form ----------------------------------------------------------------------------------------
c1, c2, c3 = st.columns([2, 1, 1])
store = c1.selectbox("Store", stores, key="pg_store")
try:
    record = wb.get_store(store)
    vs = wb.vector_store(store)
    files = vs.list_files()
    fields_hint = pg.payload_fields(vs)
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()
k = c2.number_input("Results (k)", min_value=1, max_value=50, value=5, step=1, key="pg_k")
threshold = c3.number_input(
    "Score threshold",
    value=wb.default_threshold(store, record.distance),
    step=0.05,
    format="%.2f",
    placeholder="none",
    key="pg_threshold",
    help=f"Keep only results with at least this similarity; below it a chunk is not a good match. Similarity: "
    f"{pg.score_meaning(record.distance)}. Default: the store's own (Store settings), else setting"
    " search.score_threshold.",
)

names = {f"{f.file_name or f.file_id} ({f.chunks} chunks)": f for f in files}
with st.expander(
    "Filters", expanded=bool(st.session_state.get("pg_fields") or st.session_state.get("pg_file", ALL_FILES) != ALL_FILES)
):
    f1, f2 = st.columns(2)
    file_label = f1.selectbox("File", [ALL_FILES, *names], key="pg_file")
    fields = f2.text_area(
        "Extra fields",
        key="pg_fields",
        height=80,
        placeholder="page = 2",
        help="The chunks' payload fields. One `field = value` per line; every line must match. Numbers, true/false"
        ' and null are read as such; quote a value to match it as text ("2024").',
    )
    f2.caption(md("Fields in this store: {}", ", ".join(fields_hint) or "none yet"))

c4, c6, c5 = st.columns([3, 1, 1])
query = c4.text_input("Query", key="pg_query", placeholder="Ask something the documents answer")
mode = c6.selectbox(
    "Ranking",
    list(pg.MODES),
    index=list(pg.MODES).index(wb.settings.search.mode),
    format_func=pg.MODES.get,
    key="pg_mode",
    help=pg.MODE_HELP + " The default comes from the setting search.mode.",
)
compare = c5.selectbox(
    "Compare with",
    [NO_COMPARE, *[s for s in stores if s != store]],
    key="pg_compare",
    help="Run the same query on a second store, side by side.",
)
t1, t2 = st.columns(2)
show_map = t1.toggle("Show the map of the store", value=True, key="pg_map")
rerank_default, rerank_n = wb.reranks(store)
rerank = t2.toggle(
    "Rerank",
    value=rerank_default,
    key=f"pg_rerank_{store}",
    help=f"Order the {rerank_n} best passages again by the sentence of each that best answers the"
    " query (the store's own model). Slow: it embeds every sentence of those passages, about"
    " 2 s more per search on a 2-core laptop, and on the project's Rust-book questions it did"
    " not rank better (docs/search.md). The default comes from the store's template, else the"
    " setting search.rerank.",
)

for key in KEYS:  # remember for the next visit
    if key in st.session_state:
        saved[key] = st.session_state[key]

if not query.strip():
    st.info("Type a query and press Enter.")
    st.stop()

# -- the results -------------------------------------------------------------------------------------
runs: list[pg.SearchRun] = []
try:
    chosen = names.get(file_label)
    where = pg.build_where(chosen.file_id if chosen else None, fields)
    runs.append(pg.timed_search(wb, store, query, int(k), where=where, score_threshold=threshold, mode=mode, rerank=rerank))
    if compare != NO_COMPARE:
        other = pg.compare_where(where, chosen.file_name if chosen is not None else None)
        runs.append(
            pg.timed_search(wb, compare, query, int(k), where=other, score_threshold=threshold, mode=mode, rerank=rerank)
        )
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()

if len(runs) == 1:
    left, right = st.columns([3, 2])
    with left:
        render_summary(runs[0])
        render_hits(runs[0])
    with right:
        try:
            if show_map:
                render_map(runs[0])
            render_distribution(runs[0])
        except KnowledgeError as exc:
            st.error(inert(exc))
else:
    columns = st.columns(2)
    for col, run in zip(columns, runs):
        with col:
            st.subheader(inert(run.store))
            render_summary(run)
            render_hits(run)
            try:
                if show_map:
                    render_map(run)
                render_distribution(run)
            except KnowledgeError as exc:
                st.error(inert(exc))
