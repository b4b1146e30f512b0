"""Evaluate: measure stores with a labelled question set, compare runs over time, tune chunking and
the hybrid fusion weight (the logic is in knowledge/evaluation/)."""

from __future__ import annotations

from collections.abc import Callable

import altair as alt
import pandas as pd
import streamlit as st

from knowledge import evaluation as ev
from knowledge.chat.answer_check import check_answers, run_as_the_chat_searches
from knowledge.errors import KnowledgeError
from knowledge.text.render import inert, md
from knowledge.vocabulary import RANKING_HELP, RANKINGS, SIMILARITY
from knowledge.workbench import Workbench
from pages._ui import app_chat_service, app_workbench, flash, set_flash

wb: Workbench = app_workbench()
evals = wb.evaluations
MODE_NAMES = RANKINGS
CHUNKINGS = ["64/16", "128/32", "128/64", "192/48", "254/0", "254/64", "254/127"]

st.title("📏 Evaluate retrieval")
st.caption(
    "Does a change make search better? Ask a store labelled questions and measure where the first "
    "relevant chunk lands: recall@1/3/5/10 (answered in the top n), MRR@10 and nDCG@10 (higher is "
    "better), per store and ranking, kept so runs can be compared over time."
)

try:
    stores = wb.store_names()
    set_names = evals.set_names()
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()


# -- the question set ----------------------------------------------------------------------------------
def upload_set() -> None:
    up = st.session_state.get("ev_upload")
    if up is None:
        return
    try:
        fmt, questions = ev.parse_questions(up.getvalue(), up.name)
        name = up.name.rsplit(".", 1)[0].strip() or "questions"
        evals.save_set(name, questions, fmt)
    except KnowledgeError as exc:
        set_flash("evaluate", False, str(exc))
        return
    st.session_state["ev_set"] = name
    set_flash("evaluate", True, f"Saved the question set {name}: {len(questions)} questions.")


def save_typed() -> None:
    """The typed questions saved as a set (replacing one of the same name), chosen, and evaluated
    at once on the chosen stores (``ev_autorun``)."""
    name = (st.session_state.get("ev_typed_name") or "").strip() or "typed questions"
    try:
        questions = ev.parse_typed_questions(st.session_state.get("ev_typed", ""))
        evals.save_set(name, questions, "tsv")
    except KnowledgeError as exc:
        set_flash("evaluate_typed", False, str(exc))
        return
    st.session_state["ev_set"] = name
    st.session_state["ev_autorun"] = True
    set_flash("evaluate", True, f"Saved the question set {name}: {len(questions)} questions.")


with st.container(border=True):
    c1, c2 = st.columns([1, 1])
    c2.file_uploader(
        "Upload a question file",
        type=["tsv", "csv", "jsonl", "txt", "json"],
        key="ev_upload",
        on_change=upload_set,
        max_upload_size=10,
        help="One question per line: `question<TAB>relevant` (TSV; CSV with a comma) or JSONL "
        '`{"question": ..., "relevant": [...]}`. Relevant = any of several places, separated by `;`: '
        "a file name (`ch09-01-unrecoverable-errors-with-panic.md`), a file and page (`report.pdf#page=3`) "
        "or a snippet a relevant chunk contains (`text:cannot borrow`). An optional `expected` column (with a "
        'header line `question<TAB>relevant<TAB>expected`; JSONL: `"expected"`) holds what a good answer '
        "says, alternatives between ` | `, to check the chat's answers. A set of the same name is replaced.",
    )
    flash("evaluate")
    set_names = evals.set_names()
    with st.expander("Type questions", expanded=not set_names or bool(st.session_state.get("ev_typed"))):
        st.text_area(
            "Questions, one a line: question | what answers it",
            key="ev_typed",
            height=120,
            placeholder="How long does pasta cook? | pasta.md\nWhat do telescopes show? | sky.md; text:Jupiter's moons",
            help="After the `|`: the places that answer the question, any one is enough, separated by `;`: a file "
            "name (`notes.md`), a file and page (`report.pdf#page=3`) or a snippet a relevant chunk contains "
            "(`text:cannot borrow`).",
        )
        t1, t2 = st.columns([2, 1], vertical_alignment="bottom")
        t1.text_input("Keep them as the question set", "typed questions", key="ev_typed_name", max_chars=200)
        t2.button(
            "Save and evaluate",
            icon="▶️",
            key="ev_typed_go",
            on_click=save_typed,
            help="Saves the questions as a set (a set of the same name is replaced) and evaluates it "
            "on the stores chosen under Evaluate.",
        )
        flash("evaluate_typed")
    if not set_names:
        c1.info(
            "No question sets yet. Type questions below, or upload a file of questions with the files "
            "(or pages, or snippets) that answer them."
        )
        st.stop()
    if st.session_state.get("ev_set") not in set_names:
        st.session_state["ev_set"] = set_names[0]
    set_name = c1.selectbox("Question set", set_names, key="ev_set")
    qset = evals.get_set(set_name)
    c1.caption(
        f"{len(qset.questions)} questions · {qset.format.upper()} · updated {qset.updated:%Y-%m-%d %H:%M}"
        if qset.updated
        else f"{len(qset.questions)} questions"
    )
    with st.expander(md("Edit the questions of {}", set_name)):
        table = pd.DataFrame(
            [
                {"question": q.text, "relevant": q.relevant_label(), "expected": " | ".join(q.expected)}
                for q in qset.questions
            ]
        )
        edited = st.data_editor(
            table,
            num_rows="dynamic",
            width="stretch",
            key=f"ev_editor_{set_name}_{qset.sha256[:8]}",
            column_config={
                "question": st.column_config.TextColumn("Question", width="large"),
                "relevant": st.column_config.TextColumn(
                    "Relevant (any of, ';' between)", width="large", help="file.md; report.pdf#page=3; text:a snippet"
                ),
                "expected": st.column_config.TextColumn(
                    "Expected answer (optional, ' | ' between)",
                    width="medium",
                    help="What a good answer says, any one is enough: checked in the chat's answer "
                    "when **Check the answers** is on.",
                ),
            },
        )
        b1, b2, b3 = st.columns([1, 1, 1])
        if b1.button("Save changes", icon="💾", key="ev_save_set"):
            try:
                questions = ev.questions_from_rows(edited.to_dict("records"))
                evals.save_set(set_name, questions, qset.format)
                set_flash("evaluate", True, f"Saved {len(questions)} questions.")
                st.rerun()
            except KnowledgeError as exc:
                st.error(inert(exc))
        try:
            data, file_name, mime = ev.export_questions(qset)
        except KnowledgeError:
            data, file_name, mime = ev.export_questions(qset, "jsonl")
        b2.download_button("Download", data, file_name=file_name, mime=mime, icon="⬇️", key="ev_download")
        if b3.button("Delete the set", icon="🗑️", key="ev_delete_set"):
            evals.delete_set(set_name)
            st.session_state.pop("ev_set", None)
            st.rerun()

if not stores:
    st.info("No vector stores yet: create one and add files on **Vector stores**, then evaluate it here.")
    st.page_link("pages/stores.py", label="Open Vector stores", icon="🗂️")
    st.stop()


def metrics_frame(runs: list[ev.EvalRun]) -> pd.DataFrame:
    rows = []
    for r in runs:
        row = {
            "store": r.store,
            "ranking": MODE_NAMES.get(r.mode, r.mode),
            "chunks": f"{r.chunking['size']}/{r.chunking['overlap']}" if r.chunking else "?",
            **{m: round(v, 3) for m, v in r.metrics.items()},
            "ms / question": round(r.latency_ms["mean"], 1),
            "p95 ms": round(r.latency_ms["p95"], 1),
        }
        if r.mode == "hybrid":
            row["ranking"] += f" (w {r.search.get('fusion_weight')})"
        rows.append(row)
    return pd.DataFrame(rows)


def bar_chart(runs: list[ev.EvalRun], title: str) -> None:
    rows = [
        {
            "run": f"{r.store} · {MODE_NAMES.get(r.mode, r.mode)}"
            + (f" {r.chunking['size']}/{r.chunking['overlap']}" if r.chunking and r.chunking.get("trial") else ""),
            "metric": m,
            "value": v,
        }
        for r in runs
        for m, v in r.metrics.items()
    ]
    data = pd.DataFrame(rows)
    order = list(dict.fromkeys(data["metric"]))
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("metric:N", sort=order, title=None, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("run:N"),
            y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title="higher is better"),
            color=alt.Color("run:N", title=None, legend=alt.Legend(orient="bottom", columns=2, labelLimit=320)),
            tooltip=["run", "metric", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(height=300, title=title)
    )
    st.altair_chart(chart, width="stretch")


def rank_text(rank: int | None) -> str:
    return "—" if rank is None else str(rank)


def per_question(runs: list[ev.EvalRun]) -> None:
    st.markdown("**First relevant rank per question** (— = not in the top k)")
    table = pd.DataFrame({"question": [q.question for q in runs[0].questions]})
    for r in runs:
        table[f"{r.store} · {MODE_NAMES.get(r.mode, r.mode)}"] = [rank_text(q.first_rank) for q in r.questions]
    st.dataframe(table, hide_index=True, width="stretch")
    q = st.selectbox("Ranked files of a question", [q.question for q in runs[0].questions], key="ev_question")
    cols = st.columns(min(len(runs), 3))
    for i, r in enumerate(runs):
        res = next((x for x in r.questions if x.question == q), None)
        if res is None:
            continue
        with cols[i % len(cols)]:
            st.markdown(md("**{} · {}** — relevant: {}", r.store, MODE_NAMES.get(r.mode, r.mode), res.relevant))
            st.caption(f"✅ relevant, ⬜ not; the number after a file is its {SIMILARITY} (cosine; higher is better).")
            lines = [
                f"{n}. "
                + inert(
                    f"{'✅' if h.relevant else '⬜'} {h.file_name}"  # the marker stays a list's
                    + (f" · page {h.page}" if h.page else "")
                    + f" · {h.score:.3f}"
                )
                for n, h in enumerate(res.hits, 1)
            ]
            st.markdown("  \n".join(lines) or "No hits.")


def answers_block(check: ev.AnswerCheck, run: ev.EvalRun | None) -> None:
    """An answer check beside the retrieval metrics of the run it is kept with, and a row per question."""
    n = len(check.results)
    st.markdown(
        md("**Answers of {}** · {} · ", check.store, check.config)
        + f"{n} question{'' if n == 1 else 's'} with an expected answer · {check.seconds:.1f} s"
    )
    shown = (
        [
            (m, f"{run.metrics[m]:.3f}")
            for m in (f"MRR@{run.k}", "recall@5" if run.k >= 5 else "recall@1")
            if m in run.metrics
        ]
        if run is not None
        else []
    )
    shown += [
        ("Answer holds it", f"{check.answer_holding:.0%}"),
        ("First sentence holds it", f"{check.sentence_holding:.0%}"),
        ("Cites a relevant passage", f"{check.citing_relevant:.0%}"),
    ]
    for col, (label, value) in zip(st.columns(len(shown)), shown):
        col.metric(label, value)
    if run is None:
        st.caption(
            "Not kept with a run: none of this store searched as the chat does (the ranking and fusion "
            "weight of the settings). Add that ranking to keep the answer check with its run."
        )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "question": r.question,
                    "expected": " | ".join(r.expected),
                    "first sentence": r.sentence,
                    "holds": "✅" if r.answer_holds else "❌",
                    "sentence holds": "✅" if r.sentence_holds else "❌",
                    "cited": r.cited or "—",
                    "relevant": "✅" if r.cited_relevant else "❌",
                    "s": r.seconds,
                }
                for r in check.results
            ]
        ),
        hide_index=True,
        width="stretch",
    )


tab_run, tab_compare, tab_weight, tab_chunks = st.tabs(["Evaluate", "Compare runs", "Fusion weight", "Chunk sizes"])

with tab_run:
    c1, c2, c3 = st.columns([2, 2, 1])
    chosen = c1.multiselect(
        "Stores",
        stores,
        default=[s for s in st.session_state.get("ev_stores_saved", stores[:1]) if s in stores],
        key="ev_stores",
    )
    modes = c2.multiselect(
        "Rankings",
        list(ev.MODES),
        default=[wb.settings.search.mode],
        format_func=MODE_NAMES.get,
        key="ev_modes",
        help=RANKING_HELP,
    )
    k = int(c3.number_input("Depth (k)", min_value=1, max_value=50, value=10, key="ev_k"))
    st.session_state["ev_stores_saved"] = chosen
    asked = sum(1 for q in qset.questions if q.expected)
    check_on = st.toggle(  # the page's width: its label says why it is off, and was cut in a column
        f"Check the answers ({asked} question{'' if asked == 1 else 's'} with an expected answer)"
        if asked
        else "Check the answers (no question has an expected answer)",
        key="ev_answers_on",
        disabled=not asked,
        help="Also ask each question that has an expected answer (the set's `expected` column) in a chat of its own "
        "over each store, and check that the answer holds it and that its first sentence cites a relevant "
        "passage. The chats are deleted after."
        if asked
        else "No question of this set has an expected answer: add an `expected` column (Edit the questions).",
    ) and bool(asked)
    a_config = None
    if check_on:
        configs = ["offline", *[c.name for c in wb.llm_configs().list() if c.type == "CHAT" and c.name != "offline"]]
        a_config = st.columns([2, 3])[0].selectbox(
            "Chat model",
            configs,
            key="ev_a_config",
            help="offline: the offline assistant (it quotes the sentences that answer, no language "
            "model); or a chat model config of Settings (asked at its URL, nowhere else).",
        )
    autorun = bool(st.session_state.pop("ev_autorun", False)) and bool(chosen and modes)
    if st.button("Evaluate", type="primary", icon="▶️", disabled=not chosen or not modes, key="ev_go") or autorun:
        bar = st.progress(0.0, text="Searching...")
        done_runs, failed, checks = [], [], []
        steps = len(chosen) * (len(modes) + (1 if check_on else 0))
        step = 0

        def advance(what: str, step: int) -> Callable[[int, int], None]:
            return lambda n, total: bar.progress((step + n / total) / steps, text=f"{what}: question {n} of {total}")

        for store in chosen:
            store_runs = []
            for mode in modes:
                try:
                    store_runs.append(
                        wb.evaluations.evaluate(
                            store, qset, mode, k, progress=advance(f"{store} · {MODE_NAMES[mode]}", step)
                        )
                    )
                except KnowledgeError as exc:
                    failed.append(f"{store} · {MODE_NAMES[mode]}: {exc}")
                step += 1
            kept_id = None
            if check_on:
                try:
                    check = check_answers(
                        app_chat_service(wb),
                        store,
                        qset,
                        None if a_config == "offline" else a_config,
                        progress=advance(f"{store} · answers", step),
                    )
                    target = run_as_the_chat_searches(wb, store_runs)
                    if target is not None:
                        kept = ev.with_answers(target, check)
                        store_runs = [kept if r is target else r for r in store_runs]
                        kept_id = kept.id
                    checks.append((check, kept_id))
                except KnowledgeError as exc:
                    failed.append(f"{store} · answers: {exc}")
                step += 1
            done_runs += [evals.save_run(r).id for r in store_runs]
        bar.empty()
        for f in failed:
            st.error(inert(f))
        st.session_state["ev_last"] = {"set": set_name, "runs": done_runs, "answers": checks}
    last = st.session_state.get("ev_last")
    if last and last["set"] == set_name and (last["runs"] or last.get("answers")):
        try:
            runs = [evals.get_run(rid) for rid in last["runs"]]
        except KnowledgeError as exc:
            st.error(inert(exc))
            runs = []
        if runs:
            st.subheader("Metrics per store and ranking")
            st.dataframe(metrics_frame(runs), hide_index=True, width="stretch")
            bar_chart(runs, f"{set_name}: {len(qset.questions)} questions")
        by_id = {r.id: r for r in runs}
        if last.get("answers"):
            st.subheader("Answers")
            st.caption(
                "Does the chat's answer say what the set expects (case, spacing and Markdown marks "
                "ignored), does its first sentence, and does that sentence cite a relevant passage?"
            )
            for check, kept_id in last["answers"]:
                answers_block(check, by_id.get(kept_id) if kept_id else None)
        if runs:
            per_question(runs)
    else:
        st.info("Choose stores and rankings, then **Evaluate**. Each run is kept (Compare runs).")

with tab_compare:
    history = evals.runs(set_name=set_name)
    if len(history) < 2:
        st.info(
            "Two runs of this set are needed to compare: evaluate a store, change something (chunking, "
            "model, ranking, fusion weight), evaluate again."
        )
    else:
        st.dataframe(
            metrics_frame(history).assign(when=[f"{r.started:%Y-%m-%d %H:%M}" for r in history]),
            hide_index=True,
            width="stretch",
        )
        labels = {f"{r.label()} · {r.id[:6]}": r.id for r in history}
        c1, c2 = st.columns(2)
        before = c1.selectbox("Before", list(labels), index=1, key="ev_before")
        after = c2.selectbox("After", list(labels), index=0, key="ev_after")
        rb, ra = evals.get_run(labels[before]), evals.get_run(labels[after])
        delta = ev.metric_changes(rb, ra)
        cols = st.columns(len(delta) or 1)
        for col, (m, d) in zip(cols, delta.items()):
            col.metric(m, f"{ra.metrics[m]:.3f}", f"{d:+.3f}")
        rows = ev.worse_questions(rb, ra)
        worse = sum(1 for r in rows if r["change"] < 0)
        st.markdown(f"**{worse} question{'' if worse == 1 else 's'} got worse**, listed first:")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "question": r["question"],
                        "before": rank_text(r["before"]),
                        "after": rank_text(r["after"]),
                        "RR change": round(r["change"], 3),
                    }
                    for r in rows
                ]
            ),
            hide_index=True,
            width="stretch",
        )

with tab_weight:
    st.caption(
        "Hybrid search merges the Semantic ranking and the Keyword (BM25) ranking by weighted reciprocal "
        "rank fusion: weight 1 = semantic order, 0 = keyword order, 0.5 = both alike (the setting "
        f"search.fusion_weight is {wb.settings.search.fusion_weight})."
    )
    c1, c2, c3 = st.columns([2, 2, 1])
    w_store = c1.selectbox("Store", stores, key="ev_w_store")
    weights_text = c2.text_input("Weights", "0, 0.25, 0.5, 0.75, 1", key="ev_weights")
    candidates = int(
        c3.number_input(
            "Candidates",
            min_value=1,
            max_value=1000,
            value=wb.settings.search.candidates,
            key="ev_candidates",
            help="Chunks each ranking brings to the fusion (search.candidates).",
        )
    )
    if st.button("Sweep the weight", icon="🎚️", key="ev_sweep"):
        try:
            weights = ev.parse_weights(weights_text)
            with st.spinner("Evaluating each weight..."):
                runs = wb.evaluations.sweep_fusion_weight(w_store, qset, weights, candidates=candidates)
            st.session_state["ev_sweep_result"] = (set_name, w_store, [evals.save_run(r).id for r in runs])
        except KnowledgeError as exc:
            st.error(inert(exc))
    result = st.session_state.get("ev_sweep_result")
    if result and result[0] == set_name:
        runs = [evals.get_run(rid) for rid in result[2]]
        rows = [
            {"weight": r.search["fusion_weight"], "metric": m, "value": r.metrics[m]}
            for r in runs
            for m in (f"MRR@{r.k}", "recall@1", "recall@5", f"nDCG@{r.k}")
            if m in r.metrics
        ]
        chart = (
            alt.Chart(pd.DataFrame(rows))
            .mark_line(point=True)
            .encode(
                x=alt.X("weight:Q", title="fusion weight (0 = Keyword, 1 = Semantic)"),
                y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title="metric (higher is better)"),
                color="metric:N",
                tooltip=["weight", "metric", alt.Tooltip("value:Q", format=".3f")],
            )
            .properties(height=280)
        )
        st.altair_chart(chart, width="stretch")
        best = ev.best_by_mrr(runs)
        st.success(
            md("Best on **{}**: ", result[1]) + f"weight {best.search['fusion_weight']} (MRR@{best.k} {best.mrr:.3f}). "
            f"To use it, set `[search] fusion_weight = {best.search['fusion_weight']}` in the settings file."
        )

with tab_chunks:
    st.caption(
        "Re-cut a store's stored text with other chunk settings (size/overlap in model tokens; no file "
        "is read again), embed each into a temporary copy, evaluate, and delete the copy. Embedding "
        "takes a while on a big store."
    )
    c1, c2, c3 = st.columns([2, 2, 2])
    t_store = c1.selectbox("Store", stores, key="ev_t_store")
    t_sets = c2.multiselect(
        "Chunk settings (2-4)", CHUNKINGS, default=["128/32", "192/48", "254/127"], max_selections=4, key="ev_t_settings"
    )
    t_modes = c3.multiselect(
        "Rankings", list(ev.MODES), default=["hybrid"], format_func=MODE_NAMES.get, key="ev_t_modes", help=RANKING_HELP
    )
    if st.button("Try chunk sizes", icon="🧪", disabled=not t_sets or not t_modes, key="ev_try"):
        bar = st.progress(0.0, text="Re-chunking...")
        try:
            pairs = [tuple(int(x) for x in s.split("/")) for s in t_sets]
            trials = wb.evaluations.try_chunkings(
                t_store, qset, pairs, t_modes, progress=lambda msg, f: bar.progress(min(1.0, f), text=msg)
            )
            st.session_state["ev_trials"] = (
                set_name,
                t_store,
                [(t.size, t.overlap, t.chunks, t.build_seconds, [evals.save_run(r).id for r in t.runs]) for t in trials],
            )
        except KnowledgeError as exc:
            st.error(inert(exc))
        bar.empty()
    trials = st.session_state.get("ev_trials")
    if trials and trials[0] == set_name:
        rows, all_runs = [], []
        for size, overlap, chunks, seconds, ids in trials[2]:
            runs = [evals.get_run(i) for i in ids]
            all_runs += runs
            row = {"chunks (size/overlap)": f"{size}/{overlap}", "chunk count": chunks, "embedding s": round(seconds, 1)}
            for r in runs:
                row[f"{MODE_NAMES[r.mode]} MRR@{r.k}"] = round(r.mrr, 3)
                row[f"{MODE_NAMES[r.mode]} recall@5"] = round(r.metrics.get("recall@5", 0), 3)
            rows.append(row)
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        bar_chart(all_runs, f"{trials[1]}: chunk settings")
        best = max(trials[2], key=lambda t: sum(evals.get_run(i).mrr for i in t[4]))
        name = st.text_input("Template name", f"{wb.get_store(trials[1]).template}-{best[0]}-{best[1]}", key="ev_tpl_name")
        if st.button(f"Keep {best[0]}/{best[1]} as a template", icon="📐", key="ev_keep"):
            try:
                tpl = wb.evaluations.keep_as_template(trials[1], best[0], best[1], name)
                st.success(
                    md("Saved the template **{}** ", tpl.name) + f"({best[0]}/{best[1]} tokens). New stores made "
                    "from it, and files ingested with it, are cut that way."
                )
            except KnowledgeError as exc:
                st.error(inert(exc))
