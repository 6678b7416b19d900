"""The memory QA harness that ``python -m bench.memory_qa`` and its variants share (see
bench/memory_qa/__main__.py): the product with every model call recorded, the histories
replayed into a scope, the systems' questions asked, and the scoring summed up."""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from bench.common import setup_django
from bench.memory_qa.data import (
    History,
    Question,
    load_histories,
    load_locomo,
)
from bench.memory_qa.replay import Replay, ReplayingModel

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
    completion: int | None = None  # the reply's tokens, as the provider counted them


@dataclass
class Ledger:
    """Every model call of the run, by phase (ingestion or a system's questions)."""

    phase: str = "setup"
    offline_ingest: bool = False
    calls: list[Call] = field(default_factory=list)
    replay: Replay | None = None  # the ingestion's model answers, kept across runs

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
                        usage.completion_tokens if usage else None,
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

    def recorded(purpose="chat", *, model_name=None, agent=None, session=None):
        if ledger.phase == "ingest" and ledger.offline_ingest:
            return RecordingModel(OfflineModel(), ledger)
        model = get_chat_model(purpose, model_name=model_name, agent=agent, session=session)
        if ledger.phase == "ingest" and ledger.replay is not None:
            model = ReplayingModel(model, ledger.replay)
        return RecordingModel(model, ledger)

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
    from memory.stores.recall.ranking import indexed_messages, recall_terms
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
            **reply_lengths(rows),
        }
    return result


def reply_lengths(rows: list[Scored]) -> dict:
    """The median reply of ``rows``, in characters and in tokens (the last chat call's
    completion tokens as the provider counted them; four characters a token otherwise):
    a list of candidates may hold the gold answer, so the score reads beside its length."""
    from statistics import median

    from memory.lib.tokens import estimate_tokens

    def tokens(row: Scored) -> int:
        chat = [call for call in row.answer.calls if call.kind == "chat"]
        counted = chat[-1].completion if chat else None
        return counted if counted is not None else estimate_tokens(row.answer.reply)

    return {
        "median_reply_chars": median(len(row.answer.reply) for row in rows) if rows else 0,
        "median_reply_tokens": median(tokens(row) for row in rows) if rows else 0,
    }


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


def select(histories: list[History], args) -> list[History]:
    if args.ids:
        wanted = args.ids.split(",")
        histories = [history for history in histories if history.id in wanted]
    histories = histories[: args.histories] if args.histories else histories
    chosen = []
    for history in histories:
        questions = history.questions
        if kinds := getattr(args, "kinds", ()):
            questions = [question for question in questions if question.kind in kinds]
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
    setup_django(migrate=True)


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


def write_replies(path: str, scored: list[Scored], ingestion: list[dict] = ()) -> None:
    """Every reply, scored, with its model calls; then one line per history's ingestion:
    enough for :func:`read_replies` to rebuild the run's report (``--merge``)."""
    with open(path, "w", encoding="utf-8") as handle:
        for row in scored:
            record = {
                "history": row.history,
                "system": row.system,
                "kind": row.kind,
                "q": row.question.q,
                "answer": row.question.answer,
                "accept": list(row.question.accept),
                "reply": row.answer.reply,
                "right": row.right,
                "f1": round(row.f1, 4),
                "detail": row.answer.detail,
                "failed": row.answer.failed,
                "calls": [asdict(call) for call in row.answer.calls],
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        for figures in ingestion:
            handle.write(json.dumps({"ingestion": figures}, ensure_ascii=False) + "\n")


def read_replies(paths: list[str]) -> tuple[list[Scored], list[dict]]:
    """The scored replies and the ingestion figures that :func:`write_replies` wrote, from
    one run or several (a run split over several model servers by ``--ids``)."""
    scored, ingestion = [], []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if "ingestion" in record:
                    ingestion.append(record["ingestion"])
                    continue
                question = Question(
                    q=record["q"],
                    answer=record["answer"],
                    kind=record["kind"],
                    accept=tuple(record.get("accept", ())),
                )
                answer = Answer(
                    reply=record["reply"],
                    failed=record["failed"],
                    calls=[Call(**call) for call in record.get("calls", ())],
                    detail=record["detail"],
                )
                scored.append(
                    Scored(
                        record["history"],
                        record["kind"],
                        record["system"],
                        record["right"],
                        record["f1"],
                        answer,
                        question,
                    )
                )
    return scored, ingestion
