"""Memory QA with consolidation off and on: does consolidating make the agent's answers truer?

Usage (from the repository root, with the model settings of the app)::

    python -m bench.memory_qa.consolidation --data bench/data/memory-qa-test.jsonl \
        [--histories N] [--questions-per-history N] [--limit N] [--ingest model|offline] \
        [--out replies.jsonl] [--runs-out runs.jsonl]

The harness of bench.memory_qa (issue 22), reused as it is: each history is replayed
through the product (stored turns, the heartbeat and exit evaluations, summaries and
promotion) with automatic consolidation turned off; every question is asked in a new
session of the history's scope (``off``); then the scope is consolidated once
(memory/actions/consolidation/run.py, the same model) and every question is asked again
(``on``). Same run, same ingestion, same model: the only difference is the consolidation.

It prints accuracy and F1 per lane, accuracy per kind, what the consolidations did, and a
last JSON line ``{"bench": "memory_qa_consolidation", ...}``. Targets (issue 23):
``update`` accuracy on at least 1.2x off (when any update question was asked), and no
kind worse by more than 5 points. A missed target exits 1. ``--out`` writes every reply,
scored, as bench.memory_qa does (its ``system`` is the lane); ``--runs-out`` writes each
consolidation's operations, applied and refused, and the scope's memory block before and
after it: together they tell which answers a consolidation changed, and how.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter

from bench.memory_qa import harness as memory_qa
from bench.memory_qa.data import load_histories, score_reply

LANES = ("off", "on")
UPDATE_RATIO = 1.2
KIND_SLACK = 0.05


def run_history(history, number: int, ledger, pending: list) -> tuple[list, dict, dict]:
    from memory.actions.consolidation import do_consolidate

    agent, user, _ = memory_qa.make_scope(f"c{number}-{history.id}")
    ledger.phase = "ingest"
    memory_qa.ingest(history, agent=agent, user=user, pending=pending)
    rows = []
    run = None
    for lane in LANES:
        if lane == "on":
            ledger.phase = "consolidate"
            run = do_consolidate(agent=agent, user=user)
        ledger.phase = lane
        for question in history.questions:
            answer = memory_qa.ask_product(user=user, agent=agent, question=question, ledger=ledger)
            right, f1 = score_reply(question, answer.reply)
            rows.append(
                memory_qa.Scored(history.id, question.kind, lane, right, f1, answer, question)
            )
            memory_qa.drain(pending)
    figures = {
        "history": history.id,
        "status": str(run.status),
        "applied": len(run.applied),
        "refused": len(run.refused),
        "detail": run.detail,
    }
    record = {
        "history": history.id,
        "applied": run.applied,
        "refused": run.refused,
        "block_before": run.block_before,
        "block_after": run.block_after,
    }
    return rows, figures, record


def targets_of(lanes: dict, kinds: dict) -> dict:
    def accuracy(kind: str, lane: str) -> float | None:
        return kinds.get(kind, {}).get(lane, {}).get("accuracy")

    off, on = accuracy("update", "off"), accuracy("update", "on")
    update = {"off": off, "on": on, "ok": off is None or (on or 0) >= UPDATE_RATIO * off}
    if off == 0:  # 1.2x of nothing: on must at least answer one more
        update["ok"] = (on or 0) > 0
    worse = {
        kind: round(accuracy(kind, "off") - accuracy(kind, "on"), 4)
        for kind in kinds
        if accuracy(kind, "off") is not None and accuracy(kind, "on") is not None
    }
    return {
        "update_ratio": update,
        "no_kind_worse": {"drops": worse, "ok": all(d <= KIND_SLACK for d in worse.values())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a memory-qa JSON Lines file")
    parser.add_argument("--histories", type=int, default=0)
    parser.add_argument("--ids", help="only these histories (comma-separated ids)")
    parser.add_argument("--questions-per-history", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--ingest", choices=("model", "offline"), default="model")
    parser.add_argument("--out", help="write every reply, scored, to this JSON Lines file")
    parser.add_argument("--runs-out", help="write each consolidation to this JSON Lines file")
    args = parser.parse_args(argv)
    histories = memory_qa.select(load_histories(args.data), args)
    workdir = tempfile.mkdtemp(prefix="bench-memory-qa-consolidation-")
    started = time.perf_counter()
    try:
        memory_qa.configure(workdir)
        from django.conf import settings

        from memory.llm import get_chat_model

        settings.CONSOLIDATION_AFTER_PROMOTIONS = 0  # "off" is off; "on" runs it once
        ledger = memory_qa.Ledger(offline_ingest=args.ingest == "offline")
        pending: list = []
        memory_qa.install_recorder(ledger, pending)
        scored, runs, records = [], [], []
        for number, history in enumerate(histories):
            rows, figures, record = run_history(history, number, ledger, pending)
            scored += rows
            runs.append(figures)
            records.append(record)
            print(f"history {history.id}: {figures}", file=sys.stderr, flush=True)
        model = get_chat_model("chat").name
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.out:
        memory_qa.write_replies(args.out, scored)
    if args.runs_out:
        with open(args.runs_out, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    lanes, kinds = memory_qa.summarize(scored, LANES), memory_qa.by_kind(scored)
    targets = targets_of(lanes, kinds)
    seconds = time.perf_counter() - started
    print(
        f"memory QA, consolidation off and on: {args.data}; {len(histories)} histories, "
        f"{sum(len(h.questions) for h in histories)} questions; model {model}; {seconds:.0f} s"
    )
    print("| lane | accuracy | F1 | " + " | ".join(kinds) + " |")
    print("|---|---:|---:|" + "---:|" * len(kinds))
    for lane in LANES:
        row = lanes.get(lane, {})
        per_kind = " | ".join(f"{kinds[k].get(lane, {}).get('accuracy', '')}" for k in kinds)
        print(f"| {lane} | {row.get('accuracy')} | {row.get('f1')} | {per_kind} |")
    statuses = Counter(run["status"] for run in runs)
    applied = sum(run["applied"] for run in runs)
    print(f"consolidations: {dict(statuses)}, {applied} operations applied")
    print(
        "targets: " + ", ".join(f"{k} {'met' if v['ok'] else 'MISSED'}" for k, v in targets.items())
    )
    ok = all(target["ok"] for target in targets.values())
    summary = {
        "bench": "memory_qa_consolidation",
        "data": args.data,
        "model": model,
        "ingest": args.ingest,
        "lanes": lanes,
        "by_kind": kinds,
        "consolidations": runs,
        "targets": targets,
        "ok": ok,
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
