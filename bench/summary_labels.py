"""The product's summary call on the labelled conversations of bench/data/summary-labels-*.jsonl
(bench/data/README.md): shared by ``python -m bench.summary_quality`` and the summary part
of ``python -m bench.real_model``.

Each conversation goes through exactly what an evaluation runs (memory/actions/summarize.py
and memory/actions/promotion.py): ``summary_input``, the constrained summary call,
``parse_summary_answer`` (the strict boolean) and, with ``second_look`` on, the second look's
score (the sentence encoder over the user's messages), taken for every conversation so
that one pass shows every threshold. What is scored
is the model's decision, before ``MIN_MEMORY_TURNS`` (most labelled conversations have 4
turns: the threshold is a rule of the product, not of the model, and is tested elsewhere).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def load_labels(path: Path, *, ids: Sequence[str] = (), per_stratum: int = 0) -> list[dict]:
    """The labelled conversations of ``path``: all, those named, or the first
    ``per_stratum`` of each (language, label) stratum in file order."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if ids:
        wanted = set(ids)
        items = [item for item in items if item["id"] in wanted]
    if per_stratum:
        seen: dict[tuple[str, bool], int] = {}
        kept = []
        for item in items:
            stratum = (item.get("lang", "en"), item["durable"])
            seen[stratum] = seen.get(stratum, 0) + 1
            if seen[stratum] <= per_stratum:
                kept.append(item)
        items = kept
    return items


def summarize_item(item: dict, *, second_look: bool, summary: bool = True) -> dict:
    """One conversation through the product's summary call and the second look
    (``summary`` off: the second look alone, which needs no model)."""
    from memory.actions.promotion import durable_score
    from memory.actions.summarize import summary_input
    from memory.llm import LLMError
    from memory.models import Message

    turns = enumerate(item["turns"], 1)
    messages = [Message(role=role, content=text, seq=seq) for seq, (role, text) in turns]
    call = summary_input(messages=messages, notes="")
    row = {
        "id": item["id"],
        "lang": item.get("lang", "en"),
        "durable": item["durable"],
        "turns": len(item["turns"]),
        "valid": False,
        "include": None,
        "score": None,
    }
    began = time.monotonic()
    try:
        if summary:
            row.update(_summary_call(call.messages, item["keep"]))
        if second_look:
            said = [m.content for m in messages if m.role == Message.Role.USER]
            row["score"] = round(durable_score(said), 4)
            row["valid"] = row["valid"] or not summary
    except LLMError as error:
        row["error"] = str(error)[:120]
    row["seconds"] = round(time.monotonic() - began, 1)
    return row


def _summary_call(call_messages: list[dict], keep: Sequence[str]) -> dict:
    from memory.actions.summarize import SUMMARY_SCHEMA, parse_summary_answer
    from memory.llm import get_chat_model

    answer = get_chat_model("summary").complete_json(
        messages=call_messages, schema=SUMMARY_SCHEMA, schema_name="topic_summary"
    )
    title, summary, include = parse_summary_answer(answer)
    lowered = summary.casefold()
    kept = all(word in lowered for word in keep)
    return {
        "valid": True,
        "include": include,
        "title": title,
        "summary": summary[:200],
        "kept": kept,
    }


def run_labels(
    items: Sequence[dict],
    *,
    second_look: bool = False,
    summary: bool = True,
    progress: Callable[[dict], None] | None = None,
) -> list[dict]:
    rows = []
    for item in items:
        row = summarize_item(item, second_look=second_look, summary=summary)
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def decision(row: dict, threshold: float | None) -> bool:
    """The product's decision for a row (memory/actions/promotion.py): the strict flag,
    and the second look's score at least ``threshold`` (``None``: the flag alone)."""
    look = threshold is None or (row["score"] is not None and row["score"] >= threshold)
    if row["include"] is None:  # the second look alone was run
        return row["score"] is not None and look
    return row["valid"] and row["include"] is True and look


def ratio(part: int, whole: int) -> str:
    return f"{part}/{whole}"


def run_summaries(path: Path) -> dict:
    """The summary part of bench.real_model: the spec's flag alone, as before."""
    rows = run_labels(load_labels(path))
    valid = [r for r in rows if r["valid"]]
    agree = [r for r in valid if r["include"] == r["durable"]]
    durable = [r for r in valid if r["durable"]]
    return {
        "conversations": len(rows),
        "valid_json": ratio(len(valid), len(rows)),
        "include_agrees": ratio(len(agree), len(valid)),
        "include_true_on_durable": ratio(sum(r["include"] for r in durable), len(durable)),
        "include_true_on_casual": ratio(
            sum(r["include"] for r in valid if not r["durable"]), len(valid) - len(durable)
        ),
        "facts_kept_on_durable": ratio(sum(bool(r.get("kept")) for r in durable), len(durable)),
        "rows": rows,
    }


def print_summaries(result: dict) -> None:
    print(f"\nsummaries: {result['conversations']} labelled conversations")
    for name in ("valid_json", "include_agrees", "include_true_on_durable"):
        print(f"  {name:<26} {result[name]}")
    for name in ("include_true_on_casual", "facts_kept_on_durable"):
        print(f"  {name:<26} {result[name]}")
    for row in result["rows"]:
        print(
            f"  {row['id']} durable={row['durable']!s:<5} include={row['include']!s:<5} "
            f"kept={row.get('kept', '-')!s:<5} {row['seconds']:6.1f}s {row.get('title', '')!r}"
        )
