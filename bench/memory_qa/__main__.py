"""Memory QA benchmark: does the agent remember, in a new session, what was said before?

Usage (from the repository root)::

    python bench/memory_qa.py --data bench/data/memory-qa-test.jsonl \
        [--histories N] [--questions-per-history N] [--limit N] [--systems ...] \
        [--ingest model|offline] [--full-max-tokens 6000] [--out replies.jsonl]
    python bench/memory_qa.py --locomo PATH/locomo10.json --conversations 2 \
        --categories 1,2,3,4 [--questions-per-history 20]

Each history is replayed through the product as it is used: one session per history
session, the turns stored as messages with their roles (replayed, not generated), the
evaluation triggers fired as the product fires them (the ten-message heartbeat after
each stored message, the exit trigger at each session's end; run at once in this process
instead of on a timer thread), so drift forks, summaries and promotion happen through the
configured model. Each session, its topics and messages then get the history's date.
``--ingest offline`` runs that pipeline with the offline model (model-free drift, the
fallback summaries) while the questions still go to the configured model: for sets too
long to ingest through a slow model, and said in the output.

Each question is then asked, as a user turn in a new session, to four systems, with the
same answer model:

* ``driftless``: a new session of the history's own scope, through the real turn path
  (memory/actions/turn.py) with every built-in tool (``recall`` included);
* ``none``: the same turn path in a new scope (a fresh user): no memory;
* ``full``: one call with every turn of every session in the system prompt, dated, the
  oldest turns cut past ``--full-max-tokens`` (approximate tokens: the model's context);
* ``retrieval``: one call with the raw turns (user and assistant) the product's full-text
  index ranks first for the question (memory/stores/recall.py's terms and index: BM25 on
  SQLite, ``ts_rank`` on PostgreSQL), dated and in order, as many as fit the size of
  Driftless's largest request on that same question (approximate tokens, its tools'
  schemas included: the context it filled; a tool round re-sends that request plus the
  results, mostly from the provider's cache), or ``--retrieval-tokens`` when Driftless
  does not run.

A reply is right when it holds the gold answer or one of its ``accept`` alternatives
after normalization (case, accents, punctuation, English articles); ``abstain`` questions
(gold "unknown") are right when the reply says it does not know. Token-overlap F1 is
printed beside it. The endpoint comes from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` /
``DRIFTLESS_MODEL`` as in the app (the offline model when neither is set); the bench
makes its own SQLite database unless ``DATABASE_URL`` names one.

It prints one table (per system: accuracy, F1, prompt tokens per question as the provider
counted them, the share it served from its prompt cache, failed calls, and accuracy per
kind), the ingestion's model calls, tokens and time, the targets of issue 22, and a last
JSON line::

    {"bench": "memory_qa", "systems": {"driftless": {"accuracy": …, "f1": …,
     "prompt_tokens_per_question": …}, "none": {…}, "full": {…}, "retrieval": {…}},
     "by_kind": {…}, "targets": {…}, "ok": …}

It exits 1 when a target is missed: Driftless right at least 1.5x as often as no memory,
at least as often as retrieval, at least 90 % of full history's accuracy with at most 25 %
of its prompt tokens per question, and ``update`` questions at least 70 % as often as
``fact`` questions (when both kinds are asked).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from memory_qa_data import (  # noqa: E402  (needs the sys.path lines above)
    LOCOMO_KINDS,
    History,
    Question,
    load_histories,
    load_locomo,
    score_reply,
)

SYSTEMS = ("none", "retrieval", "full", "driftless")
SOUL = (
    "You are Sage, a friendly assistant who helps one person with everyday life: travel, "
    "work, home, health, hobbies and plans. Answer in one or two short sentences. When "
    "asked about something from your earlier conversations, give the specific answer "
    "(a name, a number, a date); if you do not know, say that you do not know."
)
HISTORY_HEADER = (
    "## Your earlier conversations with this user\n"
    "Every turn below was said in an earlier session, on the date in brackets; later "
    "statements replace earlier ones."
)
RETRIEVAL_HEADER = (
    "## Excerpts of your earlier conversations with this user\n"
    "The turns most related to the question, in the order they were said, each with the "
    "date of its session; later statements replace earlier ones."
)


@dataclass
class Call:
    phase: str
    kind: str  # "chat" or "json"
    estimated: int  # approximate prompt tokens of the request (four characters a token)
    prompt: int | None  # as the provider counted them, when it said
    cached: int
    seconds: float


@dataclass
class Ledger:
    """Every model call of the run, by phase (ingestion or a system's questions)."""

    phase: str = "setup"
    offline_ingest: bool = False
    calls: list[Call] = field(default_factory=list)

    def since(self, start: int) -> list[Call]:
        return self.calls[start:]


def request_estimate(messages: list[dict], tools: list[dict] | None = None) -> int:
    from memory.lib.tokens import estimate_tokens

    text = json.dumps(tools or [], ensure_ascii=False) + json.dumps(messages, ensure_ascii=False)
    return estimate_tokens(text)


class RecordingModel:
    """A chat model that records what each call cost, around the configured one."""

    def __init__(self, inner, ledger: Ledger) -> None:
        self.inner, self.ledger = inner, ledger
        self.name, self.offline = inner.name, inner.offline

    def stream(self, *, messages, tools=None, **options):
        from memory.llm import Completion

        started = time.perf_counter()
        for item in self.inner.stream(messages=messages, tools=tools, **options):
            if isinstance(item, Completion):
                usage = item.usage
                self.ledger.calls.append(
                    Call(
                        self.ledger.phase,
                        "chat",
                        request_estimate(messages, tools),
                        usage.prompt_tokens if usage else None,
                        usage.cached_tokens if usage else 0,
                        time.perf_counter() - started,
                    )
                )
            yield item

    def complete_json(self, *, messages, **options):
        started = time.perf_counter()
        try:
            return self.inner.complete_json(messages=messages, **options)
        finally:
            self.ledger.calls.append(
                Call(
                    self.ledger.phase,
                    "json",
                    request_estimate(messages),
                    None,
                    0,
                    time.perf_counter() - started,
                )
            )


def install_recorder(ledger: Ledger, pending: list) -> None:
    """Route every model call of the product through a RecordingModel, and collect the
    evaluations the triggers start (run by :func:`drain`, not on a timer thread)."""
    import memory.actions.scheduling
    import memory.actions.summarize
    import memory.actions.turn
    import memory.drift.llm
    from memory.llm import OfflineModel, get_chat_model

    def recorded(purpose="chat", *, model_name=None):
        if ledger.phase == "ingest" and ledger.offline_ingest:
            return RecordingModel(OfflineModel(), ledger)
        return RecordingModel(get_chat_model(purpose, model_name=model_name), ledger)

    for module in (memory.actions.turn, memory.actions.summarize, memory.drift.llm):
        module.get_chat_model = recorded
    memory.actions.scheduling.set_background_starter(lambda **kwargs: pending.append(kwargs))


def drain(pending: list) -> list[str]:
    from memory.actions.evaluation import run_evaluation

    outcomes = []
    while pending:
        task = pending.pop(0)
        outcome = run_evaluation(
            session_id=task["session_id"],
            reason=task["reason"],
            debounce_token=task.get("debounce_token"),
        )
        outcomes.append(outcome.action)
    return outcomes


# --- the scope and the replay ----------------------------------------------------------------


def make_scope(name: str):
    from django.contrib.auth import get_user_model

    from memory.models import Agent, Organization

    organization = Organization.objects.create(name=f"QA {name}", slug=f"qa-{name}"[:50])
    # Temperature 0 for every system (the baselines' calls ask for it too): repeatable.
    agent = Agent.objects.create(organization=organization, name="Sage", soul=SOUL, temperature=0.0)
    users = []
    for role in ("user", "stranger"):
        user = get_user_model().objects.create_user(f"{role}-{name}"[:150], password=None)
        organization.members.add(user)
        users.append(user)
    return agent, users[0], users[1]


def ingest(history: History, *, agent, user, pending: list) -> dict:
    """Replay the history's sessions; returns what the pipeline did."""
    from django.core.cache import cache

    from memory.actions.scheduling import note_message_stored, request_exit_evaluation
    from memory.models import Message, Session, Topic
    from memory.stores.messages import store_message

    outcomes: list[str] = []
    sessions = []
    for part in history.sessions:
        session = Session.objects.start(user=user, agent=agent)
        for turn in part.turns:
            role = Message.Role.USER if turn.role == "user" else Message.Role.ASSISTANT
            message = store_message(session=session, role=role, content=turn.text)
            note_message_stored(session=session, message=message)
            outcomes += drain(pending)
        request_exit_evaluation(session_id=session.pk)
        outcomes += drain(pending)
        date_session(session, part.date)
        sessions.append(session.pk)
    cache.clear()  # the persistent-memory block was cached before the dates were set
    topics = Topic.objects.filter(session_id__in=sessions)
    return {
        "sessions": len(sessions),
        "messages": Message.objects.filter(session_id__in=sessions).count(),
        "topics": topics.count(),
        "promoted": sum(1 for topic in topics if topic.in_memory),
        "forks": outcomes.count("forked"),
    }


def date_session(session, day: str) -> None:
    """Move a replayed session, its topics and messages to the history's date (noon, the
    server's time zone), keeping their order a second apart."""
    from django.utils import timezone

    from memory.models import Message, Session, Topic

    noon = timezone.make_aware(datetime.fromisoformat(day) + timedelta(hours=12))
    Session.objects.filter(pk=session.pk).update(created_at=noon)
    for number, topic in enumerate(Topic.objects.filter(session=session).order_by("pk")):
        fields = {"created_at": noon + timedelta(seconds=number)}
        if topic.memory_changed_at is not None:
            fields["memory_changed_at"] = noon + timedelta(seconds=number)
        Topic.objects.filter(pk=topic.pk).update(**fields)
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    for message in messages:
        message.created_at = noon + timedelta(seconds=message.seq)
    Message.objects.bulk_update(messages, ["created_at"])


# --- the systems ----------------------------------------------------------------------------


@dataclass
class Answer:
    reply: str
    failed: bool
    calls: list[Call]
    detail: str = ""


def ask_product(*, user, agent, question: Question, ledger: Ledger) -> Answer:
    """The question as a user turn in a new session of ``user``'s scope; the session is
    deleted afterwards, so a later question's recall never finds this one."""
    from memory.actions.turn import do_send_message
    from memory.models import Message, Session

    session = Session.objects.start(user=user, agent=agent)
    start = len(ledger.calls)
    try:
        result = do_send_message(session=session, content=question.q)
        reply = result.reply.content if result.reply else ""
        tools = [m.tool_name for m in result.activity if m.role == Message.Role.TOOL]
        failed = result.failure is not None
    finally:
        Session.objects.filter(pk=session.pk).delete()
    return Answer(reply, failed, ledger.since(start), detail=",".join(tools))


def ask_plain(*, context: str, question: Question, ledger: Ledger) -> Answer:
    """One call: the soul and ``context`` as the system prompt, the question as the user."""
    from memory.llm import Completion, LLMError, get_chat_model

    model = RecordingModel(get_chat_model("chat"), ledger)
    messages = [
        {"role": "system", "content": f"{SOUL}\n\n{context}".strip()},
        {"role": "user", "content": question.q},
    ]
    start = len(ledger.calls)
    try:
        reply = next(
            item.content
            for item in model.stream(messages=messages, tools=None, temperature=0.0)
            if isinstance(item, Completion)
        )
        return Answer(reply, False, ledger.since(start))
    except (LLMError, StopIteration):
        return Answer("", True, ledger.since(start))


def transcript_lines(history: History) -> list[str]:
    return [
        f"[{part.date}] {turn.role}: {' '.join(turn.text.split())}"
        for part in history.sessions
        for turn in part.turns
    ]


def full_context(history: History, *, max_tokens: int) -> tuple[str, int]:
    """Every turn, dated, the oldest cut to fit ``max_tokens``; and how many were cut."""
    from memory.lib.tokens import estimate_tokens, oldest_to_drop

    lines = transcript_lines(history)
    start = oldest_to_drop([estimate_tokens(line) + 1 for line in lines], max_tokens)
    return HISTORY_HEADER + "\n" + "\n".join(lines[start:]), start


def retrieval_context(*, user, agent, question: Question, budget: int) -> tuple[str, int]:
    """The raw turns the full-text index ranks first for the question, as many as fit
    ``budget`` approximate tokens for the whole request; and how many that is."""
    from memory.lib.tokens import estimate_tokens
    from memory.models import Message, Session
    from memory.stores.recall import indexed_messages, recall_terms
    from memory.stores.search import SearchError

    sessions = Session.objects.in_scope(
        agent_id=agent.pk, user_id=user.pk, organization_id=agent.organization_id
    )
    try:
        terms = recall_terms(question.q)
    except SearchError:
        return RETRIEVAL_HEADER, 0
    ranked = indexed_messages(Message.objects.filter(session__in=sessions), terms=terms, limit=400)
    used = request_estimate(
        [
            {"role": "system", "content": f"{SOUL}\n\n{RETRIEVAL_HEADER}"},
            {"role": "user", "content": question.q},
        ]
    )
    chosen = []
    for message in ranked:
        line = f"[{message.session.created_at.date().isoformat()}] {message.role}: " + " ".join(
            message.content.split()
        )
        cost = estimate_tokens(line) + 1
        if used + cost > budget:
            break
        used += cost
        chosen.append((message.session.created_at, message.seq, line))
    chosen.sort()
    return RETRIEVAL_HEADER + "\n" + "\n".join(line for _, _, line in chosen), len(chosen)


# --- one run --------------------------------------------------------------------------------


@dataclass
class Scored:
    history: str
    kind: str
    system: str
    right: bool
    f1: float
    answer: Answer
    question: Question


def run_history(history: History, number: int, args, ledger: Ledger, pending: list) -> tuple:
    """Ingest one history, then ask its questions to every system; the scored replies and
    the ingestion's figures."""
    agent, user, stranger = make_scope(f"{number}-{history.id}")
    ledger.phase = "ingest"
    start, started = len(ledger.calls), time.perf_counter()
    ingestion = ingest(history, agent=agent, user=user, pending=pending)
    ingestion["seconds"] = time.perf_counter() - started
    calls = ledger.since(start)
    ingestion["model_calls"] = len(calls)
    ingestion["estimated_tokens"] = sum(call.estimated for call in calls)
    scored: list[Scored] = []
    budgets: dict[int, int] = {}
    full, cut = full_context(history, max_tokens=args.full_max_tokens)
    ingestion["full_turns_cut"] = cut
    for system in ("driftless", "retrieval", "full", "none"):  # each system's calls in a row
        if system not in args.systems:
            continue
        ledger.phase = system
        for index, question in enumerate(history.questions):
            if system == "driftless":
                answer = ask_product(user=user, agent=agent, question=question, ledger=ledger)
                budgets[index] = max((call.estimated for call in answer.calls), default=0)
            elif system == "none":
                answer = ask_product(user=stranger, agent=agent, question=question, ledger=ledger)
            elif system == "full":
                answer = ask_plain(context=full, question=question, ledger=ledger)
            else:
                budget = budgets.get(index, args.retrieval_tokens)
                context, k = retrieval_context(
                    user=user, agent=agent, question=question, budget=budget
                )
                answer = ask_plain(context=context, question=question, ledger=ledger)
                answer.detail = f"k={k}"
            right, f1 = score_reply(question, answer.reply)
            scored.append(Scored(history.id, question.kind, system, right, f1, answer, question))
            drain(pending)  # nothing should be due; never leave a timer behind
    return scored, ingestion


def summarize(scored: list[Scored], systems: tuple[str, ...]) -> dict:
    by_system: dict[str, list[Scored]] = defaultdict(list)
    for row in scored:
        by_system[row.system].append(row)
    result = {}
    for system in systems:
        rows = by_system.get(system, [])
        if not rows:
            continue
        calls = [call for row in rows for call in row.answer.calls]
        prompt = sum(call.prompt if call.prompt is not None else call.estimated for call in calls)
        cached = sum(call.cached for call in calls)
        result[system] = {
            "questions": len(rows),
            "right": sum(row.right for row in rows),
            "accuracy": round(sum(row.right for row in rows) / len(rows), 4),
            "f1": round(sum(row.f1 for row in rows) / len(rows), 4),
            "prompt_tokens_per_question": round(prompt / len(rows), 1),
            "estimated_tokens_per_question": round(
                sum(call.estimated for call in calls) / len(rows), 1
            ),
            "cached_share": round(cached / prompt, 4) if prompt else 0.0,
            "calls_per_question": round(len(calls) / len(rows), 2),
            "failures": sum(row.answer.failed for row in rows),
            "seconds_per_question": round(sum(call.seconds for call in calls) / len(rows), 2),
        }
    return result


def by_kind(scored: list[Scored]) -> dict:
    table: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for row in scored:
        table[row.kind][row.system].append(row.right)
    return {
        kind: {
            system: {"accuracy": round(sum(rights) / len(rights), 4), "questions": len(rights)}
            for system, rights in systems.items()
        }
        for kind, systems in sorted(table.items())
    }


def check_targets(systems: dict, kinds: dict) -> dict:
    """Issue 22's targets, each with its figures; None where a system did not run. A
    Driftless that answers nothing right meets none of them (0 >= 0.9 x 0 says nothing)."""
    targets: dict[str, dict] = {}
    d, none, full, retr = (systems.get(name) for name in ("driftless", "none", "full", "retrieval"))
    if d and none:
        targets["vs_none"] = {
            "need": "driftless right >= 1.5 x none",
            "ok": d["right"] >= 1.5 * none["right"] and d["right"] > 0,
        }
    if d and retr:
        targets["vs_retrieval"] = {
            "need": "driftless accuracy >= retrieval accuracy",
            "ok": d["accuracy"] >= retr["accuracy"] and d["right"] > 0,
        }
    if d and full:
        share = (
            d["prompt_tokens_per_question"] / full["prompt_tokens_per_question"]
            if full["prompt_tokens_per_question"]
            else 0.0
        )
        targets["vs_full"] = {
            "need": "driftless accuracy >= 0.9 x full, with <= 25 % of its prompt tokens",
            "ratio": round(d["accuracy"] / full["accuracy"], 3) if full["accuracy"] else None,
            "token_share": round(share, 3),
            "ok": d["accuracy"] >= 0.9 * full["accuracy"] and share <= 0.25 and d["right"] > 0,
        }
    fact, update = kinds.get("fact", {}).get("driftless"), kinds.get("update", {}).get("driftless")
    if fact and update:
        targets["update_vs_fact"] = {
            "need": "driftless update accuracy >= 0.7 x fact accuracy",
            "ok": update["accuracy"] >= 0.7 * fact["accuracy"] and fact["accuracy"] > 0,
        }
    return targets


def print_report(systems: dict, kinds: dict, ingestion: list[dict], targets: dict, args) -> None:
    names = [name for name in SYSTEMS if name in systems]
    kind_names = list(kinds)
    header = ["system", "right", "accuracy", "F1", "prompt tok/q", "cached", "calls/q", "fail"]
    header += kind_names
    rows = []
    for name in names:
        row = systems[name]
        cells = [
            name,
            f"{row['right']}/{row['questions']}",
            f"{100 * row['accuracy']:.1f} %",
            f"{row['f1']:.3f}",
            f"{row['prompt_tokens_per_question']:,.0f}",
            f"{100 * row['cached_share']:.0f} %",
            f"{row['calls_per_question']:.2f}",
            str(row["failures"]),
        ]
        for kind in kind_names:
            entry = kinds[kind].get(name)
            cells.append(f"{100 * entry['accuracy']:.0f} %" if entry else "-")
        rows.append(cells)
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for cells in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(cells, widths, strict=True)))
    counts = ", ".join(
        f"{kind} {next(iter(kinds[kind].values()))['questions']}" for kind in kind_names
    )
    print(f"questions per kind: {counts}")
    total = {
        key: sum(item[key] for item in ingestion)
        for key in ("sessions", "messages", "topics", "promoted", "forks", "model_calls")
    }
    seconds = sum(item["seconds"] for item in ingestion)
    tokens = sum(item["estimated_tokens"] for item in ingestion)
    cut = sum(item["full_turns_cut"] for item in ingestion)
    print(
        f"ingestion ({'offline' if args.ingest == 'offline' else 'configured'} model): "
        f"{total['sessions']} sessions, {total['messages']} "
        f"messages -> {total['topics']} topics ({total['forks']} forks, {total['promoted']} "
        f"promoted); {total['model_calls']} model calls, ~{tokens:,} prompt tokens, "
        f"{seconds:.0f} s; full history cut {cut} oldest turns (--full-max-tokens "
        f"{args.full_max_tokens})"
    )
    for name, target in targets.items():
        figures = {k: v for k, v in target.items() if k not in ("need", "ok")}
        print(f"target {name}: {'met' if target['ok'] else 'MISSED'} ({target['need']}) {figures}")


def select(histories: list[History], args) -> list[History]:
    if args.ids:
        wanted = args.ids.split(",")
        histories = [history for history in histories if history.id in wanted]
    histories = histories[: args.histories] if args.histories else histories
    chosen = []
    for history in histories:
        questions = history.questions
        if args.questions_per_history and len(questions) > args.questions_per_history:
            picks = random.Random(f"{args.seed}:{history.id}").sample(
                range(len(questions)), args.questions_per_history
            )
            questions = [questions[i] for i in sorted(picks)]
        chosen.append(History(history.id, history.lang, history.sessions, questions))
    if args.limit:
        left, limited = args.limit, []
        for history in chosen:
            if left <= 0:
                break
            limited.append(
                History(history.id, history.lang, history.sessions, history.questions[:left])
            )
            left -= len(limited[-1].questions)
        chosen = limited
    return [history for history in chosen if history.questions]


def configure(workdir: str) -> None:
    """Django on this run's own database (SQLite in ``workdir`` unless DATABASE_URL names
    one), the in-process cache and channel layer; the model settings as the app reads them."""
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "driftless.settings")
    os.environ["DRIFTLESS_VAR_DIR"] = workdir
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ.setdefault("DEBUG", "false")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the histories come from: the project's JSON Lines, or LoCoMo's file."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="a memory-qa JSON Lines file (bench/data/memory-qa-*)")
    source.add_argument("--locomo", help="the path of LoCoMo's locomo10.json (never copied)")
    parser.add_argument("--conversations", type=int, default=2, help="LoCoMo: how many")
    parser.add_argument("--categories", default="1,2,3,4", help="LoCoMo: question categories")


def load_source(args: argparse.Namespace) -> list[History]:
    if args.data:
        return load_histories(args.data)
    categories = {int(c) for c in args.categories.split(",") if c.strip()}
    return load_locomo(args.locomo, conversations=args.conversations, categories=categories)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_source_arguments(parser)
    parser.add_argument("--histories", type=int, default=0, help="the first N histories only")
    parser.add_argument("--ids", default="", help="only these histories (ids, comma-separated)")
    parser.add_argument("--questions-per-history", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="at most N questions in all")
    parser.add_argument("--seed", type=int, default=22, help="for --questions-per-history")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--ingest", choices=("model", "offline"), default="model")
    parser.add_argument("--full-max-tokens", type=int, default=6000)
    parser.add_argument("--retrieval-tokens", type=int, default=1500)
    parser.add_argument("--out", help="write every reply, scored, to this JSON Lines file")
    args = parser.parse_args(argv)
    args.systems = tuple(s for s in SYSTEMS if s in args.systems.split(","))
    if not args.systems:
        parser.error(f"--systems: choose among {', '.join(SYSTEMS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    histories = select(load_source(args), args)
    workdir = tempfile.mkdtemp(prefix="bench-memory-qa-")
    started = time.perf_counter()
    try:
        configure(workdir)
        from django.conf import settings

        from memory.llm import get_chat_model

        ledger, pending = Ledger(offline_ingest=args.ingest == "offline"), []
        install_recorder(ledger, pending)
        scored, ingestion, done = [], [], []
        signal.signal(signal.SIGTERM, _interrupt)  # ``timeout`` stops a slow run: report it
        try:
            for number, history in enumerate(histories):
                rows, figures = run_history(history, number, args, ledger, pending)
                scored += rows
                ingestion.append(figures)
                done.append(history)
                print(
                    f"history {history.id}: {len(history.questions)} questions, "
                    f"{time.perf_counter() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        except KeyboardInterrupt:
            print(f"interrupted: reporting the {len(done)} histories done", file=sys.stderr)
        interrupted = len(done) < len(histories)
        histories = done
        model = get_chat_model("chat").name
        detector = settings.DRIFT_DETECTOR
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    systems, kinds = summarize(scored, args.systems), by_kind(scored)
    targets = check_targets(systems, kinds)
    source = args.data or f"LoCoMo ({len(histories)} conversations, categories {args.categories})"
    if interrupted:
        source += " (INTERRUPTED: only the histories done)"
    print(
        f"memory QA: {source}; {len(histories)} histories, "
        f"{sum(len(h.questions) for h in histories)} questions; answer model {model}; "
        f"drift detector {detector}; {time.perf_counter() - started:.0f} s"
    )
    print_report(systems, kinds, ingestion, targets, args)
    if args.out:
        write_replies(args.out, scored)
    ok = all(target["ok"] for target in targets.values())
    print(
        json.dumps(
            {
                "bench": "memory_qa",
                "data": source,
                "model": model,
                "ingest": args.ingest,
                "questions": sum(len(h.questions) for h in histories),
                "systems": systems,
                "by_kind": kinds,
                "ingestion": ingestion,
                "targets": targets,
                "ok": ok,
            },
            ensure_ascii=False,
        )
    )
    return 0 if ok and not interrupted else 1


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def write_replies(path: str, scored: list[Scored]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in scored:
            record = {
                "history": row.history,
                "system": row.system,
                "kind": row.kind,
                "q": row.question.q,
                "answer": row.question.answer,
                "reply": row.answer.reply,
                "right": row.right,
                "f1": round(row.f1, 4),
                "detail": row.answer.detail,
                "failed": row.answer.failed,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["LOCOMO_KINDS", "main"]
