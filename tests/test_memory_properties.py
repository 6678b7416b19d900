"""A property test of the memory core on PostgreSQL (hypothesis, a rule-based state machine).

Random sequences of sends, replies, tool rounds, forks, evaluations (drift or refresh),
new topics, the user's and the agent's curation, model answers and injected model
failures, over two sessions of one scope, must:

* never lose a message, and keep each session's sequence numbers unique and gap-free
  (1..n, n = ``Session.message_count``);
* keep exactly one active topic per session;
* leave every session's persistent-memory block (read through the cache) equal to one
  computed from scratch from the database;
* never erase a real summary: once a topic has a model-made summary, it is never
  replaced by a fallback, whatever fails later.

Each example runs inside a savepoint that is rolled back; summaries go through the real
client to the fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.cache import cache
from django.db import transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from memory.actions.curation import CurationRefused, do_agent_curation, do_user_curation
from memory.actions.evaluation import evaluate_session
from memory.actions.fork import ForkPlan, do_silent_fork, tool_safe_cut
from memory.actions.summarize import STALE_ATTEMPTS, topic_history
from memory.actions.topics import do_new_topic
from memory.drift.detectors import DriftVerdict
from memory.models import Agent, MemoryState, Message, Organization, Session, Topic
from memory.stores.persistent import _fetch_entries, get_persistent_memory, truncate_to_budget
from tests.conftest import make_user
from tests.evaluation_helpers import FixedDetector

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

# At least 200 in CI; DRIFTLESS_PROPERTY_EXAMPLES runs more (or fewer) locally.
EXAMPLES = int(os.environ.get("DRIFTLESS_PROPERTY_EXAMPLES", "200"))
STEPS = 12
WORDS = st.sampled_from(["garden", "ledger", "Postgres", "basil", "Ελλάδα", "ключ", "🙂", ""])
SESSION = st.integers(0, 1)  # two sessions of one scope: each sees the other's memory
ANSWERS = st.sampled_from(
    ["promote:Garden", "promote:Ledger", "keep-out:Chat", "500", "429", "garbage"]
)


def summary_json(title: str, keep: bool) -> str:
    return json.dumps({"title": title, "summary": f"{title} (notes).", "include_in_memory": keep})


class MemoryMachine(RuleBasedStateMachine):
    fake = None  # the test's FakeOpenAI, set before the run

    def __init__(self) -> None:
        super().__init__()
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.expected: dict[int, list[tuple[int, str, str]]] = {}
        self.had_real_summary: set[int] = set()
        with self.fake._lock:
            self.fake._queue.clear()

    @initialize()
    def scope(self) -> None:
        organization = Organization.objects.create(name="Org", slug=f"org-{id(self)}")
        self.user = make_user(f"user-{id(self)}-{Organization.objects.count()}", organization)
        agent = Agent.objects.create(organization=organization, name="A", soul="You are A.")
        Agent.objects.filter(pk=agent.pk).update(memory_token_budget=40)  # FIFO exercised
        self.sessions = [Session.objects.start(user=self.user, agent=agent) for _ in range(2)]
        for session in self.sessions:
            self.expected[session.pk] = []

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self.atomic.__exit__(None, None, None)
        cache.delete_pattern("*")  # this run's keys only (the test settings' prefix)

    # --- helpers ---------------------------------------------------------------------

    def session(self, index: int) -> Session:
        return Session.objects.get(pk=self.sessions[index].pk)

    def store(self, session: Session, role: str, content: str = "", **fields) -> Message:
        message = session.append_message(role=role, content=content, **fields)
        self.expected[session.pk].append((message.seq, role, content))
        return message

    @contextmanager
    def model(self, answer: str) -> Iterator[None]:
        """The summary model's answers during one step: a JSON summary (promoting or not),
        an HTTP error or garbage. Every call of the step gets it; nothing leaks to the next."""
        kind, _, title = answer.partition(":")
        if kind in ("promote", "keep-out"):
            self.fake.default_text = summary_json(title, kind == "promote")
        elif kind == "garbage":
            self.fake.default_text = "{'title': 'not json'"
        else:
            for _ in range(STALE_ATTEMPTS):
                self.fake.fail(int(kind))
        try:
            yield
        finally:
            with self.fake._lock:
                self.fake._queue.clear()

    # --- rules -------------------------------------------------------------------------

    @rule(index=SESSION, words=st.lists(WORDS, min_size=1, max_size=3), replied=st.booleans())
    def turn(self, index, words, replied):
        session = self.session(index)
        self.store(session, "user", " ".join(words) or "…")
        if replied:
            self.store(session, "assistant", " ".join(reversed(words)) or "ok")

    @rule(index=SESSION, calls=st.integers(1, 2), answered=st.booleans())
    def tool_call(self, index, calls, answered):
        session = self.session(index)
        ids = [f"call-{session.message_count + 1}-{n}" for n in range(calls)]
        tool_calls = [
            {"id": call_id, "type": "function", "function": {"name": "notes", "arguments": "{}"}}
            for call_id in ids
        ]
        self.store(session, "assistant", "", tool_calls=tool_calls)
        for call_id in ids if answered else ids[:1]:
            self.store(session, "tool", '{"ok": true}', tool_call_id=call_id, tool_name="notes")

    @rule(index=SESSION, at=st.integers(0, 30), answer=ANSWERS)
    def fork(self, index, at, answer):
        session = self.session(index)
        topic = session.active_topic()
        history = topic_history(topic)
        if len(history) < 2:
            return
        cut = tool_safe_cut(history, 1 + at % (len(history) - 1), lowest=1)
        if cut is None:
            return
        plan = ForkPlan(session.pk, topic.pk, start_seq=history[cut].seq, reason="property")
        with self.model(answer):
            do_silent_fork(plan=plan)

    @rule(index=SESSION, drifted=st.booleans(), start=st.integers(-1, 12), answer=ANSWERS)
    def evaluate(self, index, drifted, start, answer):
        verdict = DriftVerdict(drifted, start if drifted else None, "property")
        with self.model(answer):
            evaluate_session(
                session_id=self.sessions[index].pk,
                reason="property",
                detector=FixedDetector(verdict),
            )

    @rule(index=SESSION, answer=ANSWERS)
    def new_topic(self, index, answer):
        with self.model(answer):
            do_new_topic(session=self.session(index))

    @rule(
        index=SESSION,
        pick=st.integers(0, 20),
        state=st.sampled_from(list(MemoryState)),
        actor=st.sampled_from(["user", "agent"]),
        answer=ANSWERS,
    )
    def curate(self, index, pick, state, actor, answer):
        topics = list(self.session(index).topics.order_by("pk"))
        topic = topics[pick % len(topics)]
        action = {"none": "demote", "promoted": "promote", "deprecated": "deprecate"}[state]
        with self.model(answer):  # promoting an unsummarized topic may summarize it first
            try:
                if actor == "user":
                    do_user_curation(topic=topic, state=state, user=self.user)
                else:
                    do_agent_curation(topic=topic, action=action)
            except CurationRefused:
                pass  # a guard (the user's position, an empty topic): nothing changes

    # --- invariants (one check, few queries: it runs after every step) ----------------

    @invariant()
    def memory_invariants(self):
        if not getattr(self, "sessions", None):
            return
        ids = [session.pk for session in self.sessions]
        sessions = {s.pk: s for s in Session.objects.select_related("agent").filter(pk__in=ids)}
        # No message lost; sequence numbers unique and gap-free; every message in a topic
        # of its own session.
        stored: dict[int, list] = {pk: [] for pk in ids}
        for session_id, seq, role, content, topic_session in (
            Message.objects.filter(session_id__in=ids)
            .order_by("session_id", "seq")
            .values_list("session_id", "seq", "role", "content", "topic__session_id")
        ):
            assert topic_session == session_id
            stored[session_id].append((seq, role, content))
        for pk in ids:
            assert stored[pk] == self.expected[pk]
            count = sessions[pk].message_count
            assert [seq for seq, _, _ in stored[pk]] == list(range(1, count + 1))
        # Exactly one active topic per session; a real summary is never erased.
        active = dict.fromkeys(ids, 0)
        for pk, session_id, is_active, summary, fallback in Topic.objects.filter(
            session_id__in=ids
        ).values_list("pk", "session_id", "is_active", "summary", "summary_is_fallback"):
            active[session_id] += is_active
            if pk in self.had_real_summary:
                assert summary.strip() and not fallback, f"topic {pk} lost its summary"
            elif summary.strip() and not fallback:
                self.had_real_summary.add(pk)
        assert set(active.values()) == {1}
        # The memory block each session reads (through the cache) equals one computed
        # from the database now.
        scope = _fetch_entries(sessions[ids[0]])
        for pk in ids:
            session = sessions[pk]
            entries = tuple(entry for entry in scope if entry.session_id != pk)
            fresh = truncate_to_budget(entries, budget=session.agent.memory_token_budget)
            assert get_persistent_memory(session=session) == fresh


def test_the_memory_core_keeps_its_invariants(fake_openai):
    MemoryMachine.fake = fake_openai
    run_state_machine_as_test(
        MemoryMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,  # no example database written into the repository
        ),
    )
