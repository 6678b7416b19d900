"""The sweep: what the database says is overdue, done again.

Run every ``EVALUATION_SWEEP_SECONDS`` (Celery beat in the full mode, driftless/celery.py;
a daemon thread of the server process in the embedded mode, :func:`start_sweeper`). It

* finishes the turns of processes that died mid-turn: an expired turn lease gets its
  error record ("the reply was interrupted") and is freed, even if nobody writes to that
  session again;
* enqueues every evaluation still due ``EVALUATION_SWEEP_GRACE_SECONDS`` after it was
  asked for (its own task was lost with the broker, its worker died, or it was skipped
  because the session was busy). Claiming one moves its due time to now, so concurrent
  sweeps enqueue it once and a failing one is retried once per grace period; the
  evaluation itself is idempotent (memory/actions/evaluation.py), so a late duplicate is a no-op.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

from memory.actions.evaluation import enqueue_evaluation
from memory.lib.outage import broker_breaker
from memory.models import Session
from memory.stores import leases
from memory.stores.messages import TURN_LEASE_PREFIX, record_interrupted_turn

logger = logging.getLogger(__name__)

# At most this many evaluations enqueued per sweep: a backlog drains over several sweeps.
SWEEP_BATCH = 200


@dataclass(frozen=True)
class SweepReport:
    interrupted_turns: int
    evaluations: int


def sweep() -> SweepReport:
    return SweepReport(_finish_interrupted_turns(), _enqueue_overdue_evaluations())


def _finish_interrupted_turns() -> int:
    count = 0
    for name in leases.expired(TURN_LEASE_PREFIX):
        held = leases.take_expired(name)
        if held is None:
            continue
        try:
            if record_interrupted_turn(session_id=int(name.removeprefix(TURN_LEASE_PREFIX))):
                count += 1
        finally:
            leases.release(held)
    return count


def _enqueue_overdue_evaluations() -> int:
    if not broker_breaker.allows():
        return 0  # the broker failed a moment ago: leave the requests due for next time
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.EVALUATION_SWEEP_GRACE_SECONDS)
    overdue = Session.objects.filter(evaluation_due_at__lte=cutoff).order_by("evaluation_due_at")
    count = 0
    for session_id, due in overdue.values_list("pk", "evaluation_due_at")[:SWEEP_BATCH]:
        if Session.objects.filter(pk=session_id, evaluation_due_at=due).update(
            evaluation_due_at=now
        ):
            enqueue_evaluation(session_id=session_id, reason="sweep")
            count += 1
    return count


_sweeper: threading.Thread | None = None
_sweeper_lock = threading.Lock()


def start_sweeper() -> None:
    """The embedded mode's periodic sweep: a daemon thread of this process. Does nothing
    where a worker runs the tasks (Celery beat sweeps there) or when already started."""
    from memory.tasks import sweep_task

    global _sweeper
    with _sweeper_lock:
        if not sweep_task.app.conf.task_always_eager or _sweeper is not None:
            return
        _sweeper = threading.Thread(target=_sweep_forever, name="sweeper", daemon=True)
        _sweeper.start()


def _sweep_forever() -> None:
    stop = threading.Event()
    while not stop.wait(settings.EVALUATION_SWEEP_SECONDS):
        try:
            report = sweep()
            if report.interrupted_turns or report.evaluations:
                logger.info("sweep: %s", report)
        except Exception:
            logger.exception("the sweep failed; it runs again in a moment")
        finally:
            connections.close_all()
