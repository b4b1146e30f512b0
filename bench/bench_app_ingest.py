"""Searches in the app while another tab ingests, and the app server's resident memory.

``python bench/bench_app_ingest.py [--files 20] [--searches 8] [--json]`` starts the real app
(``streamlit run app.py`` headless on a free port, a temporary data folder, the bundled model) and
drives it in Debian's Chromium through Playwright with two browser contexts (two users' tabs):

* tab B, on the Search playground, runs ``--searches`` searches on a store before anything is
  ingested (idle), then as many as fit while tab A ingests, then ``--searches`` more after;
* tab A, on the Vector stores page, drops ``--files`` chapters of the Rust book (about 300 chunks
  for 20) into that store and waits for the batch to end;
* then tab B asks one question on the Chat page (the offline assistant: no language model).

A search's wall time is from the Enter key to the end of the page's run that shows the hits (the
browser's view of the script state); the page's own figure is its caption, "N results in X ms".
Printed: p50 / max of both, idle and during the ingest, and their ratios (the same run), and the
resident memory (RSS, MB) of the server process -- and of its child processes, if any -- after the
start, after the ingest, after the searches and after the chat question. With ``--py-spy`` a
``py-spy dump`` of the server is taken during the first slow search (for finding where it waits).

Figures only: nothing is asserted. Run it niced on a shared machine (``nice -n 5``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO.parent / "shared" / "corpus" / "md" / "rust-book"
for candidate in (Path("/work/shared/corpus/md/rust-book"),):
    if not BOOK.is_dir() and candidate.is_dir():
        BOOK = candidate
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
QUERIES = [
    "how do I read a guess from the user",
    "what is ownership",
    "borrowing rules for references",
    "mutable variables and shadowing",
    "integer overflow in release builds",
    "how does a loop return a value",
    "string slices",
    "method syntax on structs",
    "enums with data",
    "match must be exhaustive",
    "cargo build and run",
    "installing rustup on linux",
    "comments in rust code",
    "tuples and arrays",
    "functions with return values",
    "if let syntax",
    "the stack and the heap",
    "dangling references",
    "the Option enum instead of null",
    "printing a struct with debug",
]
CAPTION = re.compile(r"(\d+) results? in (\d+) ms")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def serve(base: Path, env_extra: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """``streamlit run app.py`` on a free port with data under ``base/data``; stopped after."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KNOWLEDGE_")}
    env.update({"KNOWLEDGE_DATA_DIR": str(base / "data"), "PYTHONUNBUFFERED": "1", **(env_extra or {})})
    log = open(base / "streamlit.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while not healthy(f"{url}/_stcore/health"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the app did not start:\n{(base / 'streamlit.log').read_text()[-3000:]}")
            time.sleep(0.25)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def rss_mb(pid: int) -> tuple[float, float]:
    """``(the process's RSS, the sum over its child processes)`` in MB (10^6 bytes)."""
    import psutil

    p = psutil.Process(pid)
    own = p.memory_info().rss / 1e6
    kids = 0.0
    for c in p.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            kids += c.memory_info().rss / 1e6
    return own, kids


WATCH = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    window.__ran = false;
    if (window.__watch) window.__watch.disconnect();
    window.__watch = new MutationObserver(() => {
        if (app.getAttribute('data-test-script-state') === 'running') window.__ran = true;
    });
    window.__watch.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""
DONE = """() => window.__ran === true && document.querySelector('[data-testid="stApp"]')
    .getAttribute('data-test-script-state') === 'notRunning'"""


def settle(pg, timeout: float = 120_000) -> None:
    pg.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=timeout)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
    pg.wait_for_timeout(300)


def act(pg, action, timeout: float = 300_000) -> float:
    """Do ``action`` and wait for the run it starts to end; returns the seconds it took."""
    pg.evaluate(WATCH)
    t0 = time.perf_counter()
    action()
    pg.wait_for_function(DONE, timeout=timeout, polling=20)
    return time.perf_counter() - t0


def search(pg, query: str) -> tuple[float, float | None, int]:
    """One search on the open playground: ``(wall seconds, the page's ms, hits)``."""
    box = pg.get_by_role("textbox", name="Query", exact=True)
    box.fill(query)
    wall = act(pg, lambda: box.press("Enter"))
    text = " ".join(pg.locator('[data-testid="stCaptionContainer"]').all_inner_texts())
    m = CAPTION.search(text)
    return wall, (float(m.group(2)) if m else None), (int(m.group(1)) if m else 0)


def summary(rows: list[tuple[float, float | None, int]]) -> dict[str, float | int | None]:
    walls = [r[0] * 1000 for r in rows]
    page = [r[1] for r in rows if r[1] is not None]
    return {
        "n": len(rows),
        "wall_p50_ms": statistics.median(walls) if walls else None,
        "wall_max_ms": max(walls) if walls else None,
        "page_p50_ms": statistics.median(page) if page else None,
        "page_max_ms": max(page) if page else None,
        "hits_min": min((r[2] for r in rows), default=0),
    }


def note(what: str, value: object) -> None:
    """A figure as soon as it is measured (on standard error: the summary goes to standard output)."""
    print(f"  {what}: {value}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--book", default=str(BOOK))
    ap.add_argument("--files", type=int, default=20, help="chapters dropped in tab A (default 20)")
    ap.add_argument("--max-kb", type=float, default=16.0, help="skip chapters larger than this (default 16 kB)")
    ap.add_argument("--searches", type=int, default=8, help="idle searches before and after (default 8)")
    ap.add_argument("--py-spy", action="store_true", help="py-spy dump the server during the slowest search")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    chapters = [p for p in sorted(Path(args.book).glob("ch*.md")) if p.stat().st_size <= args.max_kb * 1000]
    seed, files = chapters[:2], chapters[2 : 2 + args.files]
    base = Path(tempfile.mkdtemp(prefix="bench-app-ingest-"))
    out: dict[str, object] = {
        "files": len(files),
        "kB": round(sum(p.stat().st_size for p in files) / 1e3),
        "load_before": os.getloadavg(),
    }
    # the store exists, with two chapters in it, before the server starts (what tab B searches idle)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KNOWLEDGE_")}
    subprocess.run(
        [sys.executable, "-m", "knowledge", "--data-dir", str(base / "data"), "ingest", "bench", *map(str, seed)],
        cwd=REPO,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # a new chat searches the store (chat.default_stores), as if picked in its sidebar
    extra = {"KNOWLEDGE_CHAT__DEFAULT_STORES": '["bench"]', **dict(kv.split("=", 1) for kv in args.env)}
    with serve(base, extra) as (url, proc), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        a, b = (browser.new_context(viewport={"width": 1280, "height": 900}) for _ in range(2))
        tab_a, tab_b = a.new_page(), b.new_page()
        for pg in (tab_a, tab_b):
            pg.set_default_timeout(120_000)
        tab_b.goto(f"{url}/search?store=bench")
        settle(tab_b)
        tab_b.get_by_role("textbox", name="Query", exact=True).wait_for()
        search(tab_b, "warm up the model")
        out["rss_after_start_mb"] = rss_mb(proc.pid)
        note("rss_after_start_mb", out["rss_after_start_mb"])
        idle = [search(tab_b, q) for q in QUERIES[: args.searches]]
        note("idle", summary(idle))

        tab_a.goto(f"{url}/stores")
        settle(tab_a)
        box = tab_a.get_by_role("combobox", name="Open store", exact=True)
        if box.input_value() != "bench":
            box.click()
            act(tab_a, lambda: tab_a.get_by_role("option", name="bench", exact=True).click())
        zone = tab_a.locator('[data-testid="stFileUploader"]').filter(
            has=tab_a.locator('[data-testid="stFileUploaderDropzone"][aria-label^="Drop files here"]')
        )
        t0 = time.perf_counter()
        zone.locator("input[type=file]").set_input_files([str(f) for f in files])
        finished = tab_a.get_by_text(f"Indexed files ({len(seed) + len(files)})", exact=True)
        during: list[tuple[float, float | None, int]] = []
        spied = False
        i = 0
        while not finished.count():
            row = search(tab_b, QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {i}"))
            i += 1
            if finished.count():  # ended during this search: not counted as "during"
                break
            during.append(row)
            note(
                f"during search {len(during)} (t={time.perf_counter() - t0:.0f} s)",
                f"wall {row[0] * 1000:.0f} ms, page {row[1]} ms, {row[2]} hits",
            )
            if args.py_spy and not spied and shutil.which("py-spy") and len(during) >= 3:
                spied = True  # dumps of the server while a search runs: where it waits
                dumps = base / "py-spy-during.txt"
                box = tab_b.get_by_role("textbox", name="Query", exact=True)
                box.fill("what does a search wait for while files are ingested")
                tab_b.evaluate(WATCH)
                box.press("Enter")
                with dumps.open("w") as f:
                    for _ in range(4):
                        time.sleep(0.25)
                        f.write(
                            subprocess.run(["py-spy", "dump", "--pid", str(proc.pid)], capture_output=True, text=True).stdout
                            + "\n=====\n"
                        )
                tab_b.wait_for_function(DONE, timeout=300_000, polling=20)
                out["py_spy_dump"] = str(dumps)
            if time.perf_counter() - t0 > 1800:
                break
        finished.wait_for(timeout=1_800_000)
        out["ingest_s"] = round(time.perf_counter() - t0, 1)
        out["load_during"] = os.getloadavg()
        out["rss_after_ingest_mb"] = rss_mb(proc.pid)
        note("during", summary(during))
        note("ingest_s", out["ingest_s"])
        note("rss_after_ingest_mb", out["rss_after_ingest_mb"])
        after = [search(tab_b, q) for q in QUERIES[-args.searches :]]
        out["rss_after_searches_mb"] = rss_mb(proc.pid)
        note("after", summary(after))
        note("rss_after_searches_mb", out["rss_after_searches_mb"])

        tab_b.goto(f"{url}/chat")
        settle(tab_b)
        chat_box = tab_b.get_by_test_id("stChatInputTextArea")
        chat_box.fill("What does the borrow checker check?")
        out["chat_s"] = round(act(tab_b, lambda: chat_box.press("Enter")), 2)
        tab_b.get_by_test_id("stChatMessage").nth(1).wait_for()
        out["chat_answer"] = tab_b.get_by_test_id("stChatMessage").nth(1).inner_text()[:300]
        note("chat_answer", out["chat_answer"])
        out["rss_after_chat_mb"] = rss_mb(proc.pid)
        note("rss_after_chat_mb", out["rss_after_chat_mb"])
        browser.close()
    chunks = subprocess.run(
        [sys.executable, "-m", "knowledge", "--data-dir", str(base / "data"), "stores"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    out["stores"] = chunks.strip()
    out["idle"], out["during"], out["after"] = summary(idle), summary(during), summary(after)
    d, s = out["during"], out["idle"]
    assert isinstance(d, dict) and isinstance(s, dict)
    if d["n"] and s["wall_p50_ms"]:
        out["wall_p50_ratio"] = round(d["wall_p50_ms"] / s["wall_p50_ms"], 2)
        out["wall_max_ratio"] = round(d["wall_max_ms"] / s["wall_max_ms"], 2)
        if d["page_p50_ms"] and s["page_p50_ms"]:
            out["page_p50_ratio"] = round(d["page_p50_ms"] / s["page_p50_ms"], 2)
        a = out["after"]
        assert isinstance(a, dict)
        if a["wall_p50_ms"]:  # idle again, on the store as full as it ends
            out["wall_p50_ratio_to_after"] = round(d["wall_p50_ms"] / a["wall_p50_ms"], 2)
            if d["page_p50_ms"] and a["page_p50_ms"]:
                out["page_p50_ratio_to_after"] = round(d["page_p50_ms"] / a["page_p50_ms"], 2)
    shutil.rmtree(base / "data", ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=1, default=str))
        return 0
    print(f"{out['files']} files ({out['kB']} kB) ingested in {out['ingest_s']} s; load {out['load_during']}")
    print(out["stores"])
    for part in ("idle", "during", "after"):
        r = out[part]
        assert isinstance(r, dict)
        print(
            f"search {part:6}: n={r['n']:3} wall p50 {r['wall_p50_ms'] or 0:7.0f} ms max {r['wall_max_ms'] or 0:7.0f}"
            f" | page p50 {r['page_p50_ms'] or 0:6.0f} ms max {r['page_max_ms'] or 0:6.0f} | hits >= {r['hits_min']}"
        )
    print(
        f"during / idle before: wall p50 {out.get('wall_p50_ratio')}, max {out.get('wall_max_ratio')},"
        f" page p50 {out.get('page_p50_ratio')}; during / idle after: wall p50"
        f" {out.get('wall_p50_ratio_to_after')}, page p50 {out.get('page_p50_ratio_to_after')}"
    )
    for key in ("rss_after_start_mb", "rss_after_ingest_mb", "rss_after_searches_mb", "rss_after_chat_mb"):
        own, kids = out[key]  # type: ignore[misc]
        print(f"{key:24}: server {own:6.0f} MB, child processes {kids:6.0f} MB")
    print(f"chat question answered in {out['chat_s']} s")
    if "py_spy_dump" in out:
        print(f"py-spy dump during a search: {out['py_spy_dump']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
