"""Exit triggers: a 2000 ms trailing-edge debounce per session (embedded mode: a timer
thread in this process; tests/test_celery_worker.py covers the worker path)."""

import time

import pytest

from memory.actions import evaluation as pipeline
from memory.actions import scheduling
from memory.actions.scheduling import request_exit_evaluation
from memory.models import Session
from tests.evaluation_helpers import SUBJECT_A, converse, join_background_evaluations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def runs(monkeypatch):
    """(session id, monotonic time, action) of every pipeline run, which runs for real."""
    seen = []
    real = pipeline.evaluate_session

    def recording(**kwargs):
        started = time.monotonic()
        outcome = real(**kwargs)
        seen.append((kwargs["session_id"], started, outcome.action))
        return outcome

    monkeypatch.setattr(pipeline, "evaluate_session", recording)
    yield seen
    join_background_evaluations()


def test_five_exit_triggers_within_a_second_run_the_pipeline_once_two_seconds_after_the_last(
    session, runs
):
    converse(session, SUBJECT_A)
    for _ in range(5):
        started = time.monotonic()
        request_exit_evaluation(session_id=session.pk)
        assert time.monotonic() - started < 0.2  # the caller is never held up
        last = time.monotonic()
        time.sleep(0.2)

    time.sleep(3.0)
    join_background_evaluations()

    assert len(runs) == 1
    ((session_id, ran_at, action),) = runs
    assert session_id == session.pk
    assert 1.9 <= ran_at - last <= 2.9
    assert action in ("forked", "refreshed")  # it evaluated (no skip)


def test_each_session_is_debounced_on_its_own(session, alice, agent, runs):
    other = Session.objects.start(user=alice, agent=agent)
    converse(session, SUBJECT_A)
    converse(other, SUBJECT_A)
    for _ in range(3):
        request_exit_evaluation(session_id=session.pk)
        request_exit_evaluation(session_id=other.pk)

    time.sleep(2.6)
    join_background_evaluations()

    assert sorted(session_id for session_id, _, _ in runs) == sorted([session.pk, other.pk])


def test_a_trigger_never_raises_even_when_it_cannot_be_recorded(session, runs, monkeypatch):
    def broken(*args, **kwargs):
        raise ConnectionError("the database is down")

    monkeypatch.setattr(scheduling, "enqueue_evaluation", broken)

    request_exit_evaluation(session_id=session.pk)  # no exception

    assert runs == []


def test_a_starter_set_through_the_seam_replaces_the_timer_until_it_is_unset(session):
    started: list[dict] = []
    previous = scheduling.set_background_starter(lambda **kwargs: started.append(kwargs))
    try:
        request_exit_evaluation(session_id=session.pk)
    finally:
        assert scheduling.set_background_starter(previous) is not None
    assert previous is None  # the timer thread
    (kwargs,) = started
    assert kwargs["session_id"] == session.pk and kwargs["reason"] == "exit"
    assert kwargs["delay"] == scheduling.EXIT_DEBOUNCE_SECONDS and kwargs["debounce_token"]
