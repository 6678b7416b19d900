"""The memory QA bench (python -m bench.memory_qa) end to end on a tiny history, with a scripted
model behind the fake OpenAI-compatible server: every system's score is known in advance,
so the harness (ingestion through the pipeline, the new sessions, the baselines, the
scoring, the targets and the exit status) is checked, not the model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.memory_qa.data import (
    DataError,
    Question,
    load_histories,
    normalize,
    parse_history,
    score_reply,
    token_f1,
)
from tests.fake_openai import FakeOpenAI, _Script

ROOT = Path(__file__).resolve().parent.parent

KILN = [
    ("user", "I finally bought a kiln. I got it second-hand from Gwen, my pottery teacher."),
    ("assistant", "Congratulations! A second-hand kiln from your teacher is a good start."),
    (
        "user",
        "It needs a 32 amp circuit. My sibling relocates to Lisbon in March, so he can't help.",
    ),
    ("assistant", "Then book an electrician for the circuit; that is not a DIY job."),
    ("user", "Also, we will paint the kitchen green next month."),
    ("assistant", "Green will look lovely beside the kiln corner."),
]
LOCKER = [
    ("user", "Quick one: my gym locker code is 3141, remind me if I forget."),
    ("assistant", "Noted: 3141."),
]
KITCHEN = [
    ("user", "Change of plan for the kitchen paint: yellow, not the first colour."),
    ("assistant", "Yellow it is, bright and warm."),
]
QUESTIONS = [
    {"q": "Who sold me the kiln?", "answer": "Gwen", "kind": "fact", "evidence": [[0, 0]]},
    {"q": "What is my gym locker code?", "answer": "3141", "kind": "detail-in-small-talk"},
    {"q": "What is my sister's name?", "answer": "unknown", "kind": "abstain"},
    {"q": "Which city is my brother moving to?", "answer": "Lisbon", "kind": "multi"},
    {"q": "What colour will the kitchen paint be?", "answer": "yellow", "kind": "update"},
]
HISTORY = {
    "id": "tiny-1",
    "lang": "en",
    "sessions": [
        {"date": "2026-01-10", "turns": [{"role": r, "text": t} for r, t in KILN]},
        {"date": "2026-02-03", "turns": [{"role": r, "text": t} for r, t in LOCKER]},
        {"date": "2026-02-20", "turns": [{"role": r, "text": t} for r, t in KITCHEN]},
    ],
    "questions": QUESTIONS,
}


class ScriptedMemoryModel:
    """A model that knows an answer exactly when it can read it: it answers "It is X."
    when a question's gold answer is in what it was sent (besides the question), else
    searches past chats with recall when it has the tool and has not yet, else says it
    does not know. Summaries keep every user line and ask to be remembered; the drift
    call never sees a new subject."""

    def __init__(self, questions: list[dict]) -> None:
        self.answers = {q["q"]: q["answer"] for q in questions}
        self.chat_calls = 0
        self.tool_calls = 0

    def __call__(self, body: dict) -> _Script:
        messages = body["messages"]
        if body.get("response_format"):
            return _Script(content=json.dumps(self._json(messages)))
        self.chat_calls += 1
        question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        seen = " ".join(
            str(m.get("content") or "") for m in messages if m.get("content") != question
        )
        gold = self.answers.get(question, "")
        if gold != "unknown" and normalize(gold) in normalize(seen):
            return _Script(content=f"It is {gold}.")
        tools = [t["function"]["name"] for t in body.get("tools") or ()]
        if "recall" in tools and not any(m["role"] == "tool" for m in messages[-3:]):
            self.tool_calls += 1
            arguments = json.dumps({"operation": "search", "query": question})
            return _Script(tool_calls=((f"call_{self.tool_calls}", "recall", arguments),))
        return _Script(content="I don't know.")

    @staticmethod
    def _json(messages: list[dict]) -> dict:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if "change of subject" in text:
            return {"drifted": False, "start": None}
        said = re.findall(r"^User: (.+)$", text, flags=re.MULTILINE)
        title = " ".join(said[0].split()[:4]) if said else "Chat"
        return {"title": title, "summary": " ".join(said), "include_in_memory": True}


class ScriptedServer(FakeOpenAI):
    """The fake server answering every request from ``script`` (tool calls included)."""

    def __init__(self, script: ScriptedMemoryModel) -> None:
        super().__init__()
        self.script = script

    def _take(self, body: dict, headers: dict[str, str]) -> _Script:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self.script(body)


@pytest.fixture
def scripted(tmp_path):
    data = tmp_path / "tiny.jsonl"
    data.write_text(json.dumps(HISTORY) + "\n", encoding="utf-8")
    model = ScriptedMemoryModel(QUESTIONS)
    server = ScriptedServer(model)
    yield server, model, data
    server.close()


def run_bench(server: FakeOpenAI, *args: str) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DRIFTLESS_VAR_DIR")
    }
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="bench-key",
        DRIFTLESS_MODEL="scripted",
        DRIFT_DETECTOR="auto",
        LLM_MAX_RETRIES="0",
    )
    return subprocess.run(
        [sys.executable, "-m", "bench.memory_qa", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_harness_gives_each_system_the_score_it_should(scripted, tmp_path):
    server, model, data = scripted
    out = tmp_path / "replies.jsonl"

    run = run_bench(server, "--data", str(data), "--out", str(out))

    assert run.returncode == 1, run.stdout + run.stderr  # a target is missed: see below
    report = json.loads(run.stdout.strip().splitlines()[-1])
    systems = report["systems"]
    right = {name: systems[name]["right"] for name in systems}
    # none: only the abstain question; retrieval: the index finds the kiln, the locker
    # and the kitchen paint by their words, never "brother" in "my sibling relocates";
    # full history and Driftless (memory for the long topic, recalled passages for the short
    # ones)
    # answer all five.
    assert right == {"none": 1, "retrieval": 4, "full": 5, "driftless": 5}
    # "It is Gwen." against "Gwen": precision 1/3, recall 1 -> F1 0.5, as for every right
    # one-word answer; a right abstention scores 1.
    assert systems["driftless"]["f1"] == pytest.approx((4 * 0.5 + 1) / 5)
    assert systems["none"]["f1"] == pytest.approx(1 / 5)
    assert systems["retrieval"]["f1"] == pytest.approx((3 * 0.5 + 1) / 5)
    assert report["ingestion"][0] | {"seconds": 0} == report["ingestion"][0] | {
        "sessions": 3,
        "messages": 10,
        "topics": 3,
        "promoted": 1,  # the kiln topic; the two short ones are under MIN_MEMORY_TURNS
        "forks": 0,
        "seconds": 0,
    }
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["ingestion"]["messages"] for row in rows if "ingestion" in row] == [10]
    driftless = {row["q"]: row for row in rows if row.get("system") == "driftless"}
    # Recalled into the context (RECALL_IN_CONTEXT): found with no tool call.
    assert driftless["What is my gym locker code?"]["detail"] == ""
    assert driftless["Who sold me the kiln?"]["detail"] == ""  # found in memory
    assert driftless["What is my sister's name?"]["reply"] == "I don't know."
    targets = report["targets"]
    assert {name: t["ok"] for name, t in targets.items()} == {
        "vs_none": True,
        "vs_retrieval": True,
        "vs_full": False,  # a three-session history is smaller than the tools' schemas
        "update_vs_fact": True,
        "abstain": True,  # the sister's name: "I don't know."
    }
    assert targets["vs_full"]["token_share"] > 1
    assert "target vs_full: MISSED" in run.stdout
    header = next(line for line in run.stdout.splitlines() if line.strip().startswith("system"))
    for column in ("accuracy", "F1", "prompt tok/q", "fact", "update", "abstain"):
        assert column in header


def test_the_systems_flag_runs_only_those_and_a_met_target_exits_zero(scripted):
    server, model, data = scripted

    run = run_bench(server, "--data", str(data), "--systems", "none,driftless")

    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(report["systems"]) == {"none", "driftless"}
    assert report["ok"] is True and set(report["targets"]) == {
        "vs_none",
        "update_vs_fact",
        "abstain",
    }


def test_a_run_split_by_histories_merges_into_the_report_of_one_run(scripted, tmp_path):
    """A run split over two model servers (``--ids``, each part its own ``--out``) is
    reported as one from those files; ``--kinds`` keeps the questions of those kinds only."""
    server, model, data = scripted
    out = tmp_path / "replies.jsonl"
    run = run_bench(server, "--data", str(data), "--out", str(out))
    report = json.loads(run.stdout.strip().splitlines()[-1])
    rows = out.read_text(encoding="utf-8").splitlines()
    first, second = tmp_path / "part1.jsonl", tmp_path / "part2.jsonl"
    first.write_text("\n".join(rows[:4]) + "\n", encoding="utf-8")
    second.write_text("\n".join(rows[4:]) + "\n", encoding="utf-8")

    merged = run_bench(server, "--data", str(data), "--merge", f"{first},{second}")

    assert merged.returncode == run.returncode, merged.stdout + merged.stderr
    result = json.loads(merged.stdout.strip().splitlines()[-1])
    assert result["systems"] == report["systems"]
    assert result["by_kind"] == report["by_kind"] and result["targets"] == report["targets"]
    assert "3 sessions, 10 messages" in merged.stdout  # the ingestion's line, from the files

    abstain = run_bench(server, "--data", str(data), "--kinds", "abstain", "--systems", "none")
    only = json.loads(abstain.stdout.strip().splitlines()[-1])
    assert only["questions"] == 1 and set(only["by_kind"]) == {"abstain"}


def test_an_ingestion_replayed_asks_the_model_only_the_questions(scripted, tmp_path):
    """``--ingest-replay``: the first run keeps the model's answers to the ingestion; the
    second gets them from the file, asks the model the questions alone and makes the same
    memory (the same topics promoted, the same answers)."""
    server, model, data = scripted
    replay = tmp_path / "ingestion.jsonl"
    args = ("--data", str(data), "--systems", "none,driftless", "--ingest-replay", str(replay))

    first = run_bench(server, *args)
    asked_first = len(server.requests)
    second = run_bench(server, *args)
    asked_second = len(server.requests) - asked_first

    assert first.returncode == second.returncode == 0, first.stdout + second.stderr
    kept = replay.read_text(encoding="utf-8").splitlines()
    assert kept and all(json.loads(line)["answer"] for line in kept)
    # Each run asks the questions (one request a question for "none", at least one for
    # Driftless); only the first asks for the ingestion's summaries and drift checks.
    assert asked_second == asked_first - len(kept)
    before, after = (json.loads(run.stdout.strip().splitlines()[-1]) for run in (first, second))
    for name in ("none", "driftless"):
        assert after["systems"][name]["right"] == before["systems"][name]["right"]
        assert after["systems"][name]["f1"] == before["systems"][name]["f1"]
    assert [i | {"seconds": 0} for i in after["ingestion"]] == [
        i | {"seconds": 0} for i in before["ingestion"]
    ]
    assert len(replay.read_text(encoding="utf-8").splitlines()) == len(kept)  # nothing new


def run_reach(data: Path, **env: str) -> subprocess.CompletedProcess:
    """python -m bench.memory_qa.reach: no model at all (the offline one), its own SQLite."""
    skip = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DRIFTLESS_VAR_DIR")
    clean = {key: value for key, value in os.environ.items() if key not in skip}
    return subprocess.run(
        [sys.executable, "-m", "bench.memory_qa.reach", "--data", str(data)],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_reach_bench_says_which_answers_reach_the_prompt(tmp_path):
    data = tmp_path / "tiny.jsonl"
    data.write_text(json.dumps(HISTORY) + "\n", encoding="utf-8")

    run = run_reach(data)

    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    reached = {
        row["q"]: (row["prompt"], row["recalled"], row["retrieval"]) for row in report["rows"]
    }
    # No abstain question; nothing promoted offline, so what reaches Driftless is recalled.
    # "my sibling relocates" shares no word with "brother moving": nothing finds it.
    assert reached == {
        "Who sold me the kiln?": (True, True, True),
        "What is my gym locker code?": (True, True, True),
        "Which city is my brother moving to?": (False, False, False),
        "What colour will the kitchen paint be?": (True, True, True),
    }
    assert report["by_kind"]["all"] == {
        "questions": 4,
        "prompt": 3,
        "recalled": 3,
        "retrieval": 3,
        "by_words": 3,  # recall by words alone finds these too: they share their words
        # the one question naming its evidence turn: it reaches both
        "evidence": 1,
        "ev_prompt": 1,
        "ev_retrieval": 1,
    }

    # Without the recalled passages the answers no longer reach Driftless: a missed target.
    off = run_reach(data, RECALL_IN_CONTEXT="false")

    assert off.returncode == 1, off.stdout + off.stderr
    counts = json.loads(off.stdout.strip().splitlines()[-1])["by_kind"]["all"]
    assert (counts["prompt"], counts["recalled"], counts["retrieval"]) == (0, 0, 3)
    assert (counts["ev_prompt"], counts["ev_retrieval"]) == (0, 1)


def test_scoring_normalizes_and_abstains_in_several_languages():
    fact = Question("Wer?", "Gwen Hollis", "fact", accept=("Mrs Hollis",))
    # four words said, both wanted: precision 1/2, recall 1
    assert score_reply(fact, "Das war GWEN  Hollis!") == (True, pytest.approx(2 / 3))
    assert score_reply(fact, "It was Mrs. Hollis.")[0] is True  # an accepted alternative
    assert score_reply(fact, "Gwendolyn")[0] is False  # whole words only
    place = Question("Où ?", "Zürich", "fact")
    assert score_reply(place, "À zurich, je crois.")[0] is True
    abstain = Question("¿Cómo se llama?", "unknown", "abstain")
    for reply in ("No lo sé.", "Je ne sais pas.", "Das weiß ich nicht.", "I don't know."):
        assert score_reply(abstain, reply) == (True, 1.0)
    assert score_reply(abstain, "Her name is Ana.") == (False, 0.0)
    assert score_reply(abstain, "") == (False, 0.0)
    assert token_f1("the kiln", "a kiln") == 1.0


def test_the_reader_names_what_is_wrong(tmp_path):
    bad = dict(HISTORY, questions=[{"q": "x", "answer": "y", "kind": "gossip"}])
    with pytest.raises(DataError, match="unknown kind 'gossip'"):
        parse_history(bad)
    outside = dict(HISTORY, questions=[{**QUESTIONS[0], "evidence": [[5, 0]]}])
    with pytest.raises(DataError, match="outside the history"):
        parse_history(outside)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(HISTORY) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match="bad.jsonl:2"):
        load_histories(path)
