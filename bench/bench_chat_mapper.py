"""Benchmark of the chat's per-round work that grows with the history: the message mapper and the
trace redaction.

Every round of the tool loop renders the whole history again (the "Attached files" section and the
notices are rendered fresh), so its cost matters for long chats. Prints, for histories of
``--turns`` turns (each: a user message with an attach notice, an assistant tool call, a tool result
of ~2,000 characters, an answer of ~600 characters):

* ``build_request`` time (median of ``--repeat`` runs) with a budget that keeps everything, and with
  the default budget of 16,000 tokens (turns past it are never rendered), beside the baseline
  measured in the same run: ``json.dumps`` of the resulting messages -- the serialisation the
  ``openai`` client does for every request anyway;
* ``redact`` of a request with a ``--image-mb`` MB image (base64) beside ``json.dumps`` of it.

Usage: ``python bench/bench_chat_mapper.py [--turns 50,200,800] [--repeat 7] [--image-mb 5]``.
Prints figures; never fails.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from knowledge.chat.mapper import MapperContext, build_request
from knowledge.chat.model import ASSISTANT, TEXT, TOOL, USER, Attachment, Message, Part
from knowledge.chat.store import redact

WORDS = [
    "harbour",
    "tide",
    "ship",
    "sailor",
    "lamp",
    "keeper",
    "bread",
    "flour",
    "yeast",
    "dough",
    "river",
    "bridge",
    "engine",
    "valve",
    "pressure",
    "sensor",
    "report",
    "quarter",
    "revenue",
    "margin",
    "forecast",
]


def text(n_chars: int, seed: int) -> str:
    out, i = [], seed
    while sum(len(w) + 1 for w in out) < n_chars:
        out.append(WORDS[(i * 7 + 3) % len(WORDS)])
        i += 1
    return " ".join(out)


def history(turns: int) -> list[Message]:
    msgs, seq = [], 1
    for t in range(turns):
        meta = {
            "attached": [
                {"file_id": f"file-{t:032x}", "name": f"doc-{t}.md", "kind": "document", "media_type": "text/markdown"}
            ]
        }
        msgs.append(Message(seq, USER, [Part(TEXT, text=text(200, t))], meta))
        msgs.append(
            Message(
                seq + 1,
                ASSISTANT,
                [],
                {"tool_calls": [{"id": f"c{t}", "name": "vector_search", "arguments": json.dumps({"query": text(60, t)})}]},
            )
        )
        msgs.append(Message(seq + 2, TOOL, [Part(TEXT, text=text(2000, t + 1))], {"tool_call_id": f"c{t}"}))
        msgs.append(Message(seq + 3, ASSISTANT, [Part(TEXT, text=text(600, t + 2))]))
        seq += 4
    return msgs


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", default="50,200,800")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--image-mb", type=float, default=5.0)
    args = ap.parse_args()
    attachments = [Attachment(f"file-{i:032x}", f"doc-{i}.md", "text/markdown", "document", 5000) for i in range(20)]
    print(f"cpu cores: {os.cpu_count()}")
    print(
        f"{'turns':>6} {'messages':>9} {'tokens':>9} {'build (all) ms':>15} {'build (16k) ms':>15}"
        f" {'json.dumps ms':>14} {'ratio all/dumps':>16}"
    )
    for turns in (int(x) for x in args.turns.split(",")):
        hist = history(turns)
        ctx = MapperContext(attachments=attachments, capabilities=frozenset(), budget_tokens=10**9, store="chat-x")
        full = build_request(hist, ctx)
        quarter = MapperContext(attachments=attachments, capabilities=frozenset(), budget_tokens=16_000, store="chat-x")
        t_all = median_ms(lambda h=hist, c=ctx: build_request(h, c), args.repeat)
        t_quarter = median_ms(lambda h=hist, c=quarter: build_request(h, c), args.repeat)
        t_dump = median_ms(lambda m=full.messages: json.dumps({"model": "m", "messages": m}), args.repeat)
        print(
            f"{turns:>6} {len(full.messages):>9} {full.tokens:>9,} {t_all:>15.1f} {t_quarter:>15.1f}"
            f" {t_dump:>14.1f} {t_all / t_dump:>15.1f}x"
        )

    raw = os.urandom(int(args.image_mb * 1_000_000))
    request = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(raw).decode()}},
                ],
            }
        ],
    }
    t_redact = median_ms(lambda: redact(request), args.repeat)
    t_dump = median_ms(lambda: json.dumps(request), args.repeat)
    stored = len(json.dumps(redact(request)))
    print(
        f"\nredact, one {args.image_mb:g} MB image: {t_redact:.1f} ms vs json.dumps {t_dump:.1f} ms"
        f" ({t_redact / t_dump:.2f}x); trace row {stored:,} bytes instead of {len(json.dumps(request)):,}"
    )


if __name__ == "__main__":
    main()
