"""The evaluation task on a real Celery worker over Redis (not eager mode)."""

import threading
import time

import pytest
from celery.contrib.testing.worker import start_worker

from memory.actions import evaluation as pipeline
from memory.actions.scheduling import request_exit_evaluation
from memory.models import Topic
from memory.tasks import evaluate_session_task
from tests.evaluation_helpers import SUBJECT_A, celery_eager, converse

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(settings):
    from driftless.celery import app

    with celery_eager(False):
        app.conf.broker_url = settings.CELERY_BROKER_URL
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield app


@pytest.fixture
def runs(monkeypatch):
    """(monotonic start, action, thread) of every pipeline run; the test worker runs in a
    thread of this process, so it can be observed here."""
    seen = []
    real = pipeline.evaluate_session

    def recording(**kwargs):
        started = time.monotonic()
        outcome = real(**kwargs)
        seen.append((started, outcome.action, threading.current_thread()))
        return outcome

    monkeypatch.setattr(pipeline, "evaluate_session", recording)
    return seen


def wait_for(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the worker"
        time.sleep(0.1)


def test_the_worker_runs_the_evaluation_task(session, worker, runs):
    converse(session, SUBJECT_A)

    evaluate_session_task.delay(session.pk, "test")

    wait_for(lambda: runs)
    ((_, action, thread),) = runs
    assert thread is not threading.main_thread()  # not run inline (eager)
    assert action in ("forked", "refreshed")
    assert Topic.objects.filter(session=session).exclude(summarized_at=None).exists()


def test_exit_triggers_through_redis_run_the_pipeline_once(session, worker, runs):
    """Each trigger is a task of its own on the broker; only the last token's runs."""
    converse(session, SUBJECT_A)
    for _ in range(5):
        request_exit_evaluation(session_id=session.pk)
        last = time.monotonic()
        time.sleep(0.2)

    wait_for(lambda: runs)
    time.sleep(1.0)  # room for any duplicate to show up

    ((started, action, thread),) = runs
    assert 1.9 <= started - last <= 3.5
    assert action in ("forked", "refreshed")
    assert not thread.name.startswith("evaluate-session-")  # not the embedded timer
