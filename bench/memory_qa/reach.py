"""Does the answer reach the prompt? The memory QA set measured with no model at all.

Usage (from the repository root)::

    python -m bench.memory_qa.reach --data bench/data/memory-qa-tune.jsonl [--ids a,b]
    python -m bench.memory_qa.reach --locomo PATH/locomo10.json [--conversations 2]

Each history is replayed through the product with the offline model, as
``bench.memory_qa --ingest offline`` does (so nothing is promoted and the past reaches
the agent through recall). Then, for every question but ``abstain`` ones, a new session of
the history's scope is opened with the question as its user message and its context
assembled as a turn would send it (memory/actions/context.py). Three things are checked:

* ``prompt``: whether the gold answer, or an ``accept`` alternative, is in Driftless's whole
  request, normalized as the QA bench scores replies;
* ``recalled``: whether it is in the passages recalled for the question;
* ``retrieval``: whether it is in the retrieval baseline's context at the same size;
* ``by_words``: whether it is in the request with recall ranked by words alone (BM25,
  ``RECALL_BY_MEANING=false``), the baseline of the hybrid ranking (words and meaning,
  memory/stores/recall/vectors.py), in the same run.

Questions of kind ``cross-language`` are asked in another language than the history's
(bench/data/README.md): there words alone find little.

An answer that is computed ("how many days between ...", "how much in total") is in no
turn; what it needs is its evidence, the turns the question names. So two more counts, of
the evidence turns: ``evidence`` in all, ``ev_prompt`` and ``ev_retrieval`` those that
reach Driftless's request and retrieval's context (a turn reaches a text when one of its
runs of ``EVIDENCE_WORDS`` words is there: a passage may show a cut of it).

A model can only answer what reaches it, so this bounds what a ranking or a share can
gain. It runs in seconds, which makes it the loop to choose them on (the tune half only).
It prints a table per kind and a last JSON line ``{"bench": "memory_qa_reach", ...}``, and
exits 1 when Driftless's prompt holds the answer for fewer questions than retrieval's
context does, or than recall by words alone (in all, or on the cross-language questions).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

from bench.memory_qa import harness as memory_qa
from bench.memory_qa.data import contains, normalize

CHECKS = ("prompt", "recalled", "retrieval", "by_words")
EVIDENCE = ("evidence", "ev_prompt", "ev_retrieval")
COUNTED = (*CHECKS, *EVIDENCE)
EVIDENCE_WORDS = 6


def shingles(text: str, size: int = EVIDENCE_WORDS) -> set[tuple[str, ...]]:
    """Every run of ``size`` words of ``text``, normalized (the whole text when shorter)."""
    words = normalize(text).split()
    return {tuple(words[i : i + size]) for i in range(max(1, len(words) - size + 1))}


def reaches(turn: str, text_shingles: set[tuple[str, ...]]) -> bool:
    return not shingles(turn).isdisjoint(text_shingles)


def reach_of_history(history, number: int, ledger, pending: list) -> list[dict]:
    """One row per answerable question: which of the three holds its answer."""
    from django.conf import settings

    from memory.actions.context import assemble_context
    from memory.actions.recalled import RECALLED_TITLE
    from memory.models import Message, Session
    from memory.stores.messages import store_message

    agent, user, _ = memory_qa.make_scope(f"r{number}-{history.id}")
    ledger.phase = "ingest"
    memory_qa.ingest(history, agent=agent, user=user, pending=pending)
    rows = []
    for question in history.questions:
        if question.kind == "abstain":
            continue
        session = Session.objects.start(user=user, agent=agent)
        try:
            store_message(session=session, role=Message.Role.USER, content=question.q)
            stack = assemble_context(session=session)
            settings.RECALL_BY_MEANING = False  # the baseline: recall by words alone
            words_stack = assemble_context(session=session)
        finally:
            settings.RECALL_BY_MEANING = True
            Session.objects.filter(pk=session.pk).delete()
        size = memory_qa.request_estimate(stack.messages, stack.tools)
        texts = [  # the question itself holds no answer
            str(message.get("content") or "")
            for message in stack.messages
            if (message["role"], message.get("content")) != ("user", question.q)
        ]
        recalled = next((t for t in texts if t.startswith(f"## {RECALLED_TITLE}")), "")
        retrieval, _ = memory_qa.retrieval_context(
            user=user, agent=agent, question=question, budget=size
        )
        golds = (question.answer, *question.accept)
        turns = [history.sessions[s].turns[t].text for s, t in question.evidence]
        prompt = "\n".join(texts)
        in_prompt, in_retrieval = shingles(prompt), shingles(retrieval)
        by_words = "\n".join(
            str(message.get("content") or "")
            for message in words_stack.messages
            if (message["role"], message.get("content")) != ("user", question.q)
        )
        found = {
            "prompt": prompt,
            "recalled": recalled,
            "retrieval": retrieval,
            "by_words": by_words,
        }
        rows.append(
            {
                "history": history.id,
                "kind": question.kind,
                "q": question.q,
                "tokens": size,
                **{name: any(contains(text, g) for g in golds) for name, text in found.items()},
                "evidence": len(turns),
                "ev_prompt": sum(reaches(turn, in_prompt) for turn in turns),
                "ev_retrieval": sum(reaches(turn, in_retrieval) for turn in turns),
            }
        )
    return rows


def summarize(rows: list[dict]) -> dict:
    kinds = sorted({row["kind"] for row in rows})
    table = {}
    for kind in [*kinds, "all"]:
        chosen = [row for row in rows if kind in ("all", row["kind"])]
        table[kind] = {"questions": len(chosen), **{c: sum(r[c] for r in chosen) for c in COUNTED}}
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_qa.add_source_arguments(parser)
    parser.add_argument("--ids", default="", help="only these histories (ids, comma-separated)")
    args = parser.parse_args(argv)
    histories = memory_qa.load_source(args)
    wanted = {part.strip() for part in args.ids.split(",") if part.strip()}
    histories = [h for h in histories if not wanted or h.id in wanted]
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):  # no model: the offline one
        os.environ[name] = ""
    workdir = tempfile.mkdtemp(prefix="bench-memory-qa-reach-")
    try:
        memory_qa.configure(workdir)
        ledger, pending = memory_qa.Ledger(offline_ingest=True), []
        memory_qa.install_recorder(ledger, pending)
        rows = []
        for number, history in enumerate(histories):
            rows += reach_of_history(history, number, ledger, pending)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    table = summarize(rows)
    print(f"answer reaches the prompt: {args.data or args.locomo}; {len(rows)} questions")
    print(f"{'kind':>22}  {'n':>3}  " + "  ".join(f"{c:>12}" for c in COUNTED))
    for kind, counts in table.items():
        cells = "  ".join(f"{counts[c]:>12}" for c in COUNTED)
        print(f"{kind:>22}  {counts['questions']:>3}  {cells}")
    tokens = sum(row["tokens"] for row in rows) / max(1, len(rows))
    print(f"Driftless's request: about {tokens:,.0f} tokens a question (estimated)")
    crossed = table.get("cross-language", {"prompt": 0, "by_words": 0})
    ok = (
        table["all"]["prompt"] >= table["all"]["retrieval"]
        and table["all"]["prompt"] >= table["all"]["by_words"]
        and crossed["prompt"] >= crossed["by_words"]
    )
    print(json.dumps({"bench": "memory_qa_reach", "by_kind": table, "rows": rows, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
