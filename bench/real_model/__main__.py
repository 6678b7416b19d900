"""A day of use with a real model: what the product does when the model is not a fake.

Usage (from the repository root; a model served at OPENAI_BASE_URL, e.g. the local lane
of docs/local-model.md; one request at a time, so serialize runs that share it)::

    OPENAI_BASE_URL=http://127.0.0.1:8081/v1 python -m bench.real_model \
        [--parts day,drift,summary,cache] [--turns 27] [--drift-ids ID,...] [--cache-turns 10]

Everything runs as `make run` runs it (the embedded mode: SQLite in a temporary
directory, tasks in the server process) against the endpoint, through a recording
pass-through (bench.real_model.proxy) that notes every call the product makes.

* ``day``: over REST, a scripted day (:data:`DAY`): facts to remember (``/remember``),
  a ``/note``, three subjects, a code question, a question that needs a tool, small talk;
  the evaluations trigger as they do in use (every tenth message, and the exit evaluation
  once the session is left), then a new session asks about the first subject. Per turn:
  answered (a stored reply that answers, not a stop notice), or a clear error record.
  Per call kind (reply, tool round, summary, drift): calls, failures by cause, JSON
  validity, time to first token p50/p95, tokens. Targets: at least 80 % of turns
  answered, 0 messages lost, no fact the user set removed, no exception reaching the
  user (an HTTP 500, or a traceback in what the user reads).
* ``drift``: the drift detectors side by side on the ``--drift-ids`` dialogues of
  bench/data/product-test.jsonl at interval 10: lexical (no model) and the model deciding
  (``llm``; ``auto`` skips only windows with no user turn, none in this data).
* ``summary``: the product's summary call on the labelled conversations of
  bench/data/summary-labels-test.jsonl (or ``--summary-data``): valid JSON,
  ``include_in_memory`` against the label, the durable fact kept (bench/summary_labels.py,
  shared with ``python -m bench.summary_quality``, which scores it by language and label).
* ``cache``: time to first token over a conversation of ``--cache-turns`` turns, the
  product's append-only window (the server reuses the cached prefix) against a strict
  sliding window (drop the oldest turn each time) and a cold prompt; the ratio of medians.

It prints tables and ends with one JSON line; it exits 1 when a target of ``day`` is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from bench.common import setup_django
from bench.real_model.measures import (
    DRIFT_IDS,
    print_cache,
    print_drift,
    run_cache,
    run_drift,
)
from bench.real_model.proxy import RecordingProxy
from bench.summary_labels import print_summaries, run_summaries

ROOT = Path(__file__).resolve().parents[2]

ANSWERED_TARGET = 0.8
STOP_MARK = "[Stopped:"
OFFLINE_MARK = "Offline mode:"
TRACE_MARKS = ("Traceback (most recent call last)", 'File "/', "Error:")
TURN_TIMEOUT = 1800.0

# The scripted day: (session, message, words a good answer may contain; informational).
DAY: list[tuple[int, str, tuple[str, ...]]] = [
    (1, "Hi! I'm planning a trip to Kyoto with my partner Ana next spring.", ()),
    (1, "/remember trip_dates = 3 to 10 April", ()),
    (1, "/remember partner = Ana, vegetarian", ()),
    (1, "We'd like a quiet ryokan near the Philosopher's Path. What should we look for?", ()),
    (1, "/note Booked Ryokan Yachiyo for 3-10 April, confirmation KY-4471.", ()),
    (1, "What vegetarian dishes should Ana try in Kyoto?", ("tofu", "shojin", "yuba")),
    (1, "Is the JR Pass worth it if we stay only in Kyoto?", ()),
    (1, "When are we travelling? Check what you know.", ("april",)),
    (1, "Thanks, that's helpful.", ()),
    (
        1,
        "Different question: in Python, how do I remove duplicates from a list but keep the order?",
        ("dict", "seen"),
    ),
    (1, "Why does `for i in range(len(xs)): xs.pop(i)` raise IndexError?", ("index", "shrink")),
    (1, "Can you write a function that chunks a list into pieces of size n?", ("def",)),
    (1, "What's the time complexity of your chunk function?", ("o(n)",)),
    (1, "What is 17 times 3?", ("51",)),
    (1, "Something else: my balcony tomatoes have yellow leaves at the bottom. Why?", ()),
    (1, "I water them every morning. Too much?", ()),
    (1, "/remember balcony = south-facing, 4 pots of tomatoes", ()),
    (1, "Should I add fertilizer now or wait?", ()),
    (1, "Haha, my cat keeps sleeping in the pots.", ()),
    (1, "Any quick tips to keep the cat out?", ()),
    (1, "Back to Kyoto: what was the name of our ryokan?", ("yachiyo",)),
    (1, "And is Ana vegetarian or not? Answer from what you know.", ("vegetarian",)),
    (1, "Great, thanks for today!", ()),
    (2, "Good morning! What do you remember about my Kyoto trip?", ("kyoto", "april")),
    (2, "Which dates did I give you?", ("april",)),
    (2, "Does my partner have any dietary needs?", ("vegetarian",)),
    (2, "What did we say about the yellow tomato leaves?", ()),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# --------------------------------------------------------------------------- #
# The product, as `make run` runs it
# --------------------------------------------------------------------------- #


def product_env(workdir: Path, base_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "driftless.settings",
            "SECRET_KEY": "bench-only-secret-key",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DRIFTLESS_VAR_DIR": str(workdir),
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": env.get("OPENAI_API_KEY") or "not-needed",
            "DRIFTLESS_MODEL": env.get("DRIFTLESS_MODEL") or "local",
            "EVALUATION_SWEEP_SECONDS": "5",
            "EVALUATION_SWEEP_GRACE_SECONDS": "20",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def configure_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    setup_django(migrate=True)


def make_user() -> tuple[object, object, str]:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from memory.models import Agent, Organization

    organization = Organization.objects.create(name="Bench", slug="bench")
    agent = Agent.objects.create(
        organization=organization, name="Guide", soul="You are Guide, a helpful assistant."
    )
    user = get_user_model().objects.create_user("bench", password=None)
    organization.members.add(user)
    return user, agent, Token.objects.create(user=user).key


def rest(server: str, token: str, path: str, body: dict | None = None) -> tuple[int, object]:
    request = urllib.request.Request(
        f"{server}/agents-api/{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="POST" if body is not None else "GET",
    )
    try:
        with urllib.request.urlopen(request, timeout=TURN_TIMEOUT) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw or b"{}")
    except ValueError:
        return status, raw.decode("utf-8", "replace")  # an HTML page: not for a user


def wait_up(server: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{server}/login/", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("real_model: the server did not start")


def wait_evaluated(session_id: int, timeout: float) -> bool:
    """Until the session has no evaluation due (the pipeline ran), or ``timeout``."""
    from django.db import connection

    from memory.models import Session

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        due = Session.objects.filter(pk=session_id).values_list("evaluation_due_at", flat=True)
        connection.close()
        if list(due) == [None]:
            return True
        time.sleep(2)
    return False


# --------------------------------------------------------------------------- #
# The day
# --------------------------------------------------------------------------- #


def echo_only(message: str, reply: str) -> bool:
    """The reply only repeats the user's message (this model does): not an answer."""
    said, wrote = " ".join(message.split()).casefold(), " ".join(reply.split()).casefold()
    return wrote.startswith(said) and len(wrote[len(said) :].split()) < 3


def judge_turn(status: int, answer: object, expect: tuple[str, ...], message: str = "") -> dict:
    """One turn's outcome, from the REST answer the user's client gets."""
    row = {"status": status, "outcome": "", "text": "", "expected_words": None, "ids": []}
    if not isinstance(answer, dict):
        row.update(outcome="exception (not JSON)", text=str(answer)[:80])
        return row
    for key in ("user_message", "reply", "error_message"):
        if isinstance(answer.get(key), dict):
            row["ids"].append(answer[key]["id"])
    row["ids"] += [m["id"] for m in answer.get("activity") or [] if isinstance(m, dict)]
    reply = answer.get("reply") if isinstance(answer.get("reply"), dict) else None
    text = (reply or {}).get("content") or answer.get("error") or ""
    row["text"] = " ".join(str(text).split())
    if any(mark in row["text"] for mark in TRACE_MARKS) or status >= 500 and status != 502:
        row["outcome"] = "exception"
    elif reply is None:
        clear = bool(row["text"]) and isinstance(answer.get("error_message"), dict)
        row["outcome"] = "error record" if clear else "unclear error"
    elif STOP_MARK in row["text"]:
        row["outcome"] = "stop notice"
    elif not row["text"].strip() or row["text"].startswith(OFFLINE_MARK):
        row["outcome"] = "empty"
    elif echo_only(message, row["text"]):
        row["outcome"] = "echo only"
    else:
        row["outcome"] = "answered"
        if expect:
            lowered = row["text"].casefold()
            row["expected_words"] = any(word in lowered for word in expect)
    return row


def user_facts(user) -> dict[str, object]:
    from django.db import connection

    from memory.models import ImportantInfo

    facts = {}
    for info in ImportantInfo.objects.filter(user=user):
        for key, value in info.data.items():
            if (info.provenance.get(key) or {}).get("actor") == "user":
                facts[key] = value
    connection.close()
    return facts


def all_facts(user) -> dict[str, object]:
    from django.db import connection

    from memory.models import ImportantInfo

    facts = {}
    for info in ImportantInfo.objects.filter(user=user):
        facts.update(info.data)
    connection.close()
    return facts


def run_day(server: str, token: str, user, agent, turns: int) -> dict:
    from memory.models import Session

    sessions: dict[int, int] = {}
    rows, user_set, wait = [], {}, {"evaluated": []}
    script = DAY[:turns]
    for index, (number, text, expect) in enumerate(script, 1):
        if number not in sessions:
            if sessions:  # leaving the session: the exit evaluation, as the page does
                previous = sessions[max(sessions)]
                rest(server, token, f"sessions/{previous}/evaluate", {})
                wait["evaluated"].append(wait_evaluated(previous, 900))
            sessions[number] = Session.objects.start(user=user, agent=agent).pk
        began = time.monotonic()
        status, answer = rest(
            server, token, f"sessions/{sessions[number]}/messages", {"content": text}
        )
        row = judge_turn(status, answer, expect, text)
        row.update(turn=index, session=number, message=text, seconds=time.monotonic() - began)
        rows.append(row)
        print(
            f"  {index:2d} s{number} {row['outcome']:<13} {row['seconds']:6.1f}s"
            f"  {row['text'][:70]}"
        )
        if text.startswith("/remember"):
            user_set.update(user_facts(user))
    last = sessions[max(sessions)]
    rest(server, token, f"sessions/{last}/evaluate", {})
    wait["evaluated"].append(wait_evaluated(last, 900))
    return {"rows": rows, "user_set": user_set, "sessions": list(sessions.values()), **wait}


def count_lost(rows: list[dict]) -> int:
    from django.db import connection

    from memory.models import Message

    acknowledged = {i for row in rows for i in row["ids"]}
    stored = set(Message.objects.filter(pk__in=acknowledged).values_list("pk", flat=True))
    connection.close()
    return len(acknowledged - stored)


def day_report(day: dict, proxy: RecordingProxy, user) -> dict:
    rows = day["rows"]
    outcomes = Counter(row["outcome"] for row in rows)
    now = all_facts(user)
    removed = sorted(k for k, v in day["user_set"].items() if now.get(k) != v)
    expected = [row["expected_words"] for row in rows if row["expected_words"] is not None]
    # The user's memory commands never reach the model: the share counts the model's turns.
    model_rows = [row for row in rows if not row["message"].startswith("/")]
    answered = sum(row["outcome"] == "answered" for row in model_rows)
    result = {
        "turns": len(rows),
        "model_turns": len(model_rows),
        "commands_answered": sum(row["outcome"] == "answered" for row in rows) - answered,
        "answered": answered,
        "answered_share": round(answered / len(model_rows), 3) if model_rows else 0.0,
        "outcomes": dict(outcomes),
        "expected_words_found": f"{sum(expected)}/{len(expected)}",
        "lost": count_lost(rows),
        "user_facts_set": len(day["user_set"]),
        "user_facts_removed_or_changed": removed,
        "exceptions": outcomes["exception"] + outcomes["exception (not JSON)"],
        "evaluations_finished": day["evaluated"],
        "turn_seconds_p50": round(percentile([r["seconds"] for r in rows], 0.5) or 0, 1),
        "turn_seconds_p95": round(percentile([r["seconds"] for r in rows], 0.95) or 0, 1),
        "calls": call_table(proxy),
    }
    result["topics"] = topic_titles(day["sessions"])
    return result


def topic_titles(session_ids: list[int]) -> list[dict]:
    from django.db import connection

    from memory.models import Topic

    topics = [
        {"session": t.session_id, "title": t.title, "summary": t.summary[:160]}
        for t in Topic.objects.filter(session_id__in=session_ids).order_by("pk")
    ]
    connection.close()
    return topics


def call_table(proxy: RecordingProxy) -> dict:
    table = {}
    for kind in sorted({c.kind for c in proxy.calls}):
        calls = [c for c in proxy.calls if c.kind == kind]
        failures = Counter(str(c.status) for c in calls if c.status != 200)
        ttfts = [c.ttft for c in calls if c.ttft is not None and c.status == 200]
        judged = [c.json_valid for c in calls if c.json_valid is not None]
        table[kind] = {
            "calls": len(calls),
            "failures": dict(failures),
            "json_valid": f"{sum(judged)}/{len(judged)}" if judged else "-",
            "tool_calls": sum(c.tool_calls for c in calls),
            "ttft_p50": round(percentile(ttfts, 0.5) or 0, 2) if ttfts else None,
            "ttft_p95": round(percentile(ttfts, 0.95) or 0, 2) if ttfts else None,
            "prompt_tokens": sum(c.prompt_tokens for c in calls),
            "cached_tokens": sum(c.cached_tokens for c in calls),
            "completion_tokens": sum(c.completion_tokens for c in calls),
        }
    return table


def print_day(result: dict) -> None:
    print(f"\nday: {result['turns']} turns")
    for name in ("model_turns", "answered", "answered_share", "commands_answered", "outcomes"):
        print(f"  {name:<30} {result[name]}")
    for name in ("expected_words_found", "lost"):
        print(f"  {name:<30} {result[name]}")
    for name in ("user_facts_set", "user_facts_removed_or_changed", "exceptions"):
        print(f"  {name:<30} {result[name]}")
    print(
        f"  {'turn seconds p50 / p95':<30} "
        f"{result['turn_seconds_p50']} / {result['turn_seconds_p95']}"
    )
    print(f"  {'evaluations finished':<30} {result['evaluations_finished']}")
    print(
        f"\n{'call kind':<17} {'calls':>5} {'fail':>5} {'json':>6} {'tools':>5} "
        f"{'ttft50':>7} {'ttft95':>7} {'prompt':>7} {'cached':>7} {'compl':>6}  failures"
    )
    for kind, row in result["calls"].items():
        fails = sum(row["failures"].values())
        print(
            f"{kind:<17} {row['calls']:5d} {fails:5d} {row['json_valid']:>6} "
            f"{row['tool_calls']:5d} "
            f"{fmt(row['ttft_p50'], 2):>7} {fmt(row['ttft_p95'], 2):>7} {row['prompt_tokens']:7d} "
            f"{row['cached_tokens']:7d} {row['completion_tokens']:6d}  {row['failures'] or ''}"
        )
    for topic in result["topics"]:
        print(f"  topic (session {topic['session']}): {topic['title']!r}: {topic['summary']!r}")


def day_misses(result: dict) -> list[str]:
    misses = []
    if result["answered_share"] < ANSWERED_TARGET:
        misses.append(f"answered {result['answered_share']:.0%} < {ANSWERED_TARGET:.0%}")
    if result["lost"]:
        misses.append(f"{result['lost']} messages lost")
    if result["user_facts_removed_or_changed"]:
        misses.append(f"user facts removed: {result['user_facts_removed_or_changed']}")
    if result["exceptions"]:
        misses.append(f"{result['exceptions']} exceptions reached the user")
    unclear = result["outcomes"].get("unclear error", 0)
    if unclear:
        misses.append(f"{unclear} turns ended with no reply and no clear error record")
    return misses


# --------------------------------------------------------------------------- #
# Command line
# --------------------------------------------------------------------------- #


def start_server(env: dict[str, str], workdir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = (workdir / "server.log").open("ab")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "driftless.serve",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "driftless.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(url)
    return server, url


def day_part(env: dict[str, str], workdir: Path, proxy: RecordingProxy, turns: int) -> dict:
    user, agent, token = make_user()
    server, url = start_server(env, workdir)
    try:
        day = run_day(url, token, user, agent, turns)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    result = day_report(day, proxy, user)
    result["rows"] = [
        {k: row[k] for k in ("turn", "session", "outcome", "expected_words")}
        | {"seconds": round(row["seconds"], 1)}
        | {"message": row["message"][:60], "text": row["text"][:160]}
        for row in day["rows"]
    ]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.real_model", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--parts", default="day,drift,summary,cache")
    parser.add_argument(
        "--turns", type=int, default=len(DAY), help=f"turns of the day (max {len(DAY)})"
    )
    parser.add_argument("--drift-ids", default=",".join(DRIFT_IDS))
    parser.add_argument("--drift-interval", type=int, default=10)
    parser.add_argument(
        "--summary-data", default=str(ROOT / "bench" / "data" / "summary-labels-test.jsonl")
    )
    parser.add_argument("--cache-turns", type=int, default=10)
    parser.add_argument(
        "--cache-window", type=int, default=5, help="messages the sliding window keeps"
    )
    parser.add_argument("--cold-samples", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (server log)")
    args = parser.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if unknown := parts - {"day", "drift", "summary", "cache"}:
        parser.error(f"unknown parts: {sorted(unknown)}")
    upstream = os.environ.get("OPENAI_BASE_URL")
    if not upstream:
        parser.error("set OPENAI_BASE_URL to the model's endpoint (e.g. the local lane's)")
    proxy = RecordingProxy(upstream).start()
    workdir = Path(tempfile.mkdtemp(prefix="driftless-real-model-"))
    env = product_env(workdir, proxy.base_url)
    summary: dict = {"bench": "real_model", "endpoint_model": env["DRIFTLESS_MODEL"]}
    misses: list[str] = []
    try:
        configure_django(env)
        if "day" in parts:
            summary["day"] = day_part(env, workdir, proxy, args.turns)
            print_day(summary["day"])
            misses = day_misses(summary["day"])
            summary["lost"] = summary["day"]["lost"]
        if "drift" in parts:
            summary["drift"] = run_drift(args.drift_ids.split(","), args.drift_interval)
            print_drift(summary["drift"])
        if "summary" in parts:
            summary["summary"] = run_summaries(Path(args.summary_data))
            print_summaries(summary["summary"])
        if "cache" in parts:
            summary["cache"] = run_cache(
                upstream, args.cache_turns, args.cache_window, args.cold_samples
            )
            print_cache(summary["cache"])
    finally:
        proxy.close()
        if args.keep:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summary["calls"] = {"count": len(proxy.calls)}
    summary["misses"] = misses
    print(json.dumps(summary, ensure_ascii=False))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
