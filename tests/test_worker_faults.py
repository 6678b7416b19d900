"""Durable evaluations: a real Celery worker process killed mid-evaluation, a Redis restart
under the supervised worker, and a trigger dropped on a busy session.

The worker runs as `make worker` runs it (`celery worker --beat`, so the periodic sweep
runs too) against this run's test database, a private redis-server and the fake model
server of the test, in its own process group.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from memory.actions.evaluation import evaluate_session
from memory.actions.scheduling import request_exit_evaluation, sweep
from memory.models import Session, Topic
from memory.stores import leases
from tests.evaluation_helpers import (
    SUBJECT_A,
    converse,
    join_background_evaluations,
    summary_answer,
)
from tests.faults import RedisServer, Spawned, app_env, celery_broker, python, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

EVALUATED = re.compile(r"evaluation of session (\d+) \(\w+\): EvaluationOutcome\(action='(\w+)'")
SWEEP_ENV = {"EVALUATION_SWEEP_SECONDS": "1", "EVALUATION_SWEEP_GRACE_SECONDS": "3"}


@pytest.fixture
def redis_server():
    server = RedisServer().start()
    yield server
    server.kill()


def worker_command(*, supervised: bool = False) -> list[str]:
    worker = python("-m", "celery", "-A", "driftless", "worker", "--beat", "--loglevel=info")
    worker += ["--concurrency=1", "--without-mingle", "--without-gossip"]
    worker += ["--schedule", f"/tmp/driftless-test-beat-{time.monotonic_ns()}"]
    return python("-m", "driftless.supervise", "--", *worker) if supervised else worker


def completed(*workers: Spawned) -> list[str]:
    """The evaluations that did something (not those skipped as busy or evaluated)."""
    actions = [action for w in workers for _, action in EVALUATED.findall(w.output())]
    return [action for action in actions if action != "skipped"]


def summarized(session: Session) -> bool:
    return Topic.objects.filter(session=session).exclude(summarized_at=None).exists()


def test_a_worker_killed_mid_evaluation_and_restarted_completes_it_once(
    session, fake_openai, redis_server
):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(), delay=8.0)  # the call the worker dies in
    fake_openai.reply_json(summary_answer(title="Balcony garden"))
    env = app_env(redis=redis_server, openai_base_url=fake_openai.base_url, **SWEEP_ENV)
    first = Spawned(worker_command(), env, "worker-1")
    try:
        with celery_broker(f"{redis_server.url}/2"):
            request_exit_evaluation(session_id=session.pk)
        wait_for(lambda: fake_openai.requests, 30, "the evaluation's model call")
        first.kill()
        assert not summarized(session)

        second = Spawned(worker_command(), env, "worker-2")
        try:
            # Its lease expires (about 30 s), the sweep enqueues it again, it runs.
            wait_for(lambda: summarized(session), 60, "the evaluation to complete")
            time.sleep(3)  # room for a duplicate to show up
        finally:
            second.signal(signal.SIGTERM)
            second.process.wait(timeout=20)
    finally:
        first.kill()

    assert completed(first) == []
    assert completed(second) in (["refreshed"], ["forked"])
    assert Topic.objects.filter(session=session, title="Balcony garden").count() == 1
    session.refresh_from_db()
    assert session.evaluation_due_at is None


def test_the_supervised_worker_survives_a_redis_restart_with_a_countdown_task_held(
    session, fake_openai, redis_server
):
    """The upstream failure: Redis goes away while the worker holds a countdown task
    (an exit trigger's), and comes back; celery's worker may exit with
    "'NoneType' object has no attribute 'hostname'". `make worker` starts it again."""
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden"))
    env = app_env(redis=redis_server, openai_base_url=fake_openai.base_url, **SWEEP_ENV)
    worker = Spawned(worker_command(supervised=True), env, "supervised-worker")
    try:
        wait_for(lambda: "ready." in worker.output(), 30, "the worker to start")
        with celery_broker(f"{redis_server.url}/2"):
            request_exit_evaluation(session_id=session.pk)
        time.sleep(0.5)
        redis_server.kill()
        time.sleep(4)
        redis_server.start()

        wait_for(lambda: summarized(session), 60, "the evaluation to run after the restart")
        assert worker.alive()
    finally:
        worker.signal(signal.SIGTERM)
        try:
            worker.process.wait(timeout=20)
        finally:
            worker.kill()
    print(worker.output()[-3000:])  # whether the upstream bug struck this time


def test_a_trigger_dropped_on_a_busy_session_is_evaluated_by_the_sweep(
    session, fake_openai, settings
):
    converse(session, SUBJECT_A)
    settings.DRIFT_DETECTOR = "lexical"
    settings.EVALUATION_SWEEP_GRACE_SECONDS = 0
    with leases.lease(f"evaluation:{session.pk}"):  # an interval evaluation is running
        outcome = evaluate_session(session_id=session.pk, reason="exit")
        request_exit_evaluation(session_id=session.pk)
        time.sleep(2.5)
        join_background_evaluations()
    assert outcome.action == "skipped"
    assert not summarized(session)
    session.refresh_from_db()
    assert session.evaluation_due_at is not None  # still due: nothing forgot it

    assert sweep().evaluations == 1
    join_background_evaluations()

    assert summarized(session)
    session.refresh_from_db()
    assert session.evaluation_due_at is None


def test_the_supervisor_starts_a_dead_command_again_and_passes_sigterm_on(tmp_path):
    """What keeps `make worker` up when Celery dies: here a command that crashes on its
    first run, then runs until it is told to stop."""
    runs = tmp_path / "runs"
    script = (
        "import pathlib, sys, time\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')\n"
        "sys.exit(3) if len(runs.read_text()) == 1 else time.sleep(60)\n"
    )
    supervisor = Spawned(
        python("-m", "driftless.supervise", "--", *python("-c", script)),
        {**os.environ, "PYTHONUNBUFFERED": "1"},
        "supervise",
    )
    try:
        wait_for(lambda: runs.exists() and runs.read_text() == "xx", 15, "the second run")
        supervisor.process.send_signal(signal.SIGTERM)
        supervisor.process.wait(timeout=10)
    finally:
        supervisor.kill()
    assert "exited with 3; starting it again" in supervisor.output()
    assert runs.read_text() == "xx"
