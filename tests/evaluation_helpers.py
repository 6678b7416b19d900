"""Builders shared by the evaluation-pipeline tests (summaries, drift, forks, triggers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from memory.drift.detectors import DriftVerdict, Turn
from memory.models import Message, Session

SUBJECT_A = [
    ("user", "I want to plan a vegetable garden on my balcony this spring."),
    ("assistant", "Great: tomatoes, basil and lettuce do well in balcony pots."),
    ("user", "How deep should the tomato pots be?"),
    ("assistant", "At least 30 cm deep, with drainage holes and good potting soil."),
    ("user", "And how often should I water the basil?"),
    ("assistant", "Water basil when the top centimetre of soil is dry, mornings."),
]
SUBJECT_B = [
    ("user", "NEW-SUBJECT: my laptop battery drains overnight while asleep."),
    ("assistant", "Check which devices may wake it: run powercfg or pmset logs."),
    ("user", "The logs show the network adapter waking it every hour."),
    ("assistant", "Disable wake-on-LAN for the adapter in its power settings."),
]


def say(session: Session, role: str, content: str = "", **fields) -> Message:
    return session.append_message(role=role, content=content, **fields)


def converse(session: Session, lines: Sequence[tuple[str, str]]) -> list[Message]:
    return [say(session, role, content) for role, content in lines]


def thread_of(session: Session) -> list[tuple[int, int, int]]:
    """(seq, id, topic id) of every message of the session, in sequence order."""
    return list(session.messages.order_by("seq").values_list("seq", "pk", "topic_id"))


class MarkerDetector:
    """Reports drift at the first turn (after the first) whose text holds the marker."""

    name = "marker"

    def __init__(self, marker: str = "NEW-SUBJECT") -> None:
        self.marker = marker
        self.calls: list[tuple[list[Turn], int]] = []

    def detect(self, turns: Sequence[Turn], *, scan_back: int) -> DriftVerdict:
        self.calls.append((list(turns), scan_back))
        for index, turn in enumerate(turns):
            if index >= 1 and self.marker in turn.text:
                return DriftVerdict(True, index, f"marker at turn {index}")
        return DriftVerdict(False, None, "no marker")


class FixedDetector:
    """Always answers the same verdict (to test how answers are bounded)."""

    name = "fixed"

    def __init__(self, verdict: DriftVerdict) -> None:
        self.verdict = verdict

    def detect(self, turns: Sequence[Turn], *, scan_back: int) -> DriftVerdict:
        return self.verdict


def summary_answer(title="Balcony garden", summary="Balcony veg (tomato, basil).", keep=True):
    return {"title": title, "summary": summary, "include_in_memory": keep}


def join_background_evaluations(timeout: float = 60.0) -> None:
    """Wait for the embedded-mode timer threads, so none outlives its test's database and
    none races the evaluation a test runs next. Under a loaded machine (the whole suite on
    two workers) one can take well over ten seconds; one still running at the deadline
    fails the test here, by name, rather than as a wrong topic count later."""
    deadline = time.monotonic() + timeout
    running = [t for t in threading.enumerate() if t.name.startswith("evaluate-session-")]
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [thread.name for thread in running if thread.is_alive()]
    assert not alive, f"background evaluations still running after {timeout:g} s: {alive}"


@contextmanager
def celery_eager(eager: bool) -> Iterator[None]:
    """Set the Celery app's eager mode (pytest-django's settings fixture cannot reach it)."""
    from driftless.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = eager
    try:
        yield
    finally:
        app.conf.task_always_eager = before
