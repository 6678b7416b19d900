"""When evaluations run: the triggers that ask for one, and the sweep that catches up.

Triggers. :func:`note_message_stored` (the message-send handler) enqueues an evaluation
every ``DRIFT_INTERVAL_MESSAGES`` conversation messages: the spec's "five user-assistant
turn pairs — ten messages" counts the user's messages and the assistant's replies, so
tool results and the assistant's tool-call requests do not count (a tool-heavy turn is
still one pair). The session row keeps that count (``Session.conversation_count``, taken
with the sequence number), so the check costs nothing at any session length.
:func:`request_exit_evaluation` (POST .../evaluate, socket disconnect) goes through a
2000 ms trailing-edge debounce per session that holds across processes: each trigger
stores its due time on the session and schedules the task two seconds later carrying it;
a task whose due time is no longer the latest does nothing.

Durable. Every trigger first records ``Session.evaluation_due_at``, and an evaluation
that finishes clears it (memory/actions/evaluation.py). A task lost with the broker, a
worker killed mid-evaluation, a trigger skipped because the session was busy: the request
stays due, and the periodic :func:`sweep` enqueues it again, so such faults only delay an
evaluation.

The sweep runs every ``EVALUATION_SWEEP_SECONDS`` (Celery beat in the full mode,
driftless/celery.py; a daemon thread of the server process in the embedded mode,
:func:`start_sweeper`). It

* finishes the turns of processes that died mid-turn: an expired turn lease gets its
  error record ("the reply was interrupted") and is freed, even if nobody writes to that
  session again;
* enqueues every evaluation still due ``EVALUATION_SWEEP_GRACE_SECONDS`` after it was
  asked for. Claiming one moves its due time to now, so concurrent sweeps enqueue it once
  and a failing one is retried once per grace period; the evaluation itself is idempotent,
  so a late duplicate is a no-op.

Where the work runs. With a worker (the full mode) tasks go to Celery after commit, by
name (memory/tasks.py defines them). In the embedded mode tasks would run inline
(``task_always_eager``), blocking the request and ignoring the countdown, so a daemon
timer thread in this process runs them instead; :func:`set_background_starter` replaces
that timer (a benchmark collects the evaluations and runs them itself).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from memory.actions.evaluation import run_evaluation
from memory.infra.outage import broker_breaker
from memory.lib.spec import DRIFT_INTERVAL_MESSAGES, EXIT_DEBOUNCE_SECONDS
from memory.models import Message, Session
from memory.stores import leases
from memory.stores.messages import record_interrupted_turn

logger = logging.getLogger(__name__)

# The Celery task names (memory/tasks.py): enqueued by name, so this module needs no task.
EVALUATE_TASK = "memory.evaluate_session"
SWEEP_TASK = "memory.sweep"


# --- triggers -----------------------------------------------------------------------------


def note_message_stored(*, session: Session, message: Message) -> None:
    """Call right after ``session.append_message`` stored ``message`` (the session's
    ``conversation_count`` is then its count). Records an evaluation as due and enqueues
    it, after commit, when that message is the tenth, twentieth... conversation message
    of the session: no query for the others, whatever the session's length. Never
    raises."""
    try:
        if message.is_conversation and session.conversation_count % DRIFT_INTERVAL_MESSAGES == 0:
            # An earlier request still waiting keeps its (earlier) due time.
            Session.objects.filter(pk=session.pk, evaluation_due_at=None).update(
                evaluation_due_at=timezone.now()
            )
            enqueue_evaluation(session_id=session.pk, reason="interval")
    except Exception:  # best effort: a lost heartbeat must never fail the message
        logger.exception("could not schedule the interval evaluation of session %s", session.pk)


def request_exit_evaluation(*, session_id: int) -> None:
    """An exit trigger: evaluate about two seconds after the last of a burst. Never raises.

    The due time stored on the session is the debounce token: a later trigger moves it,
    and the task carrying an earlier one then does nothing."""
    try:
        due = timezone.now() + timedelta(seconds=EXIT_DEBOUNCE_SECONDS)
        Session.objects.filter(pk=session_id).update(evaluation_due_at=due)
        enqueue_evaluation(
            session_id=session_id,
            reason="exit",
            debounce_token=due.isoformat(),
            countdown=EXIT_DEBOUNCE_SECONDS,
        )
    except Exception:  # fire-and-forget: the user's exit is never blocked
        logger.exception("could not schedule the exit evaluation of session %s", session_id)


def enqueue_evaluation(
    *, session_id: int, reason: str, debounce_token: str | None = None, countdown: float = 0.0
) -> None:
    """Schedule the evaluation task once the current transaction commits. When the
    broker cannot take it, the evaluation stays due in the database and the sweep
    (memory/actions/scheduling.py) enqueues it later."""

    def send() -> None:
        try:
            if current_app.conf.task_always_eager:
                (_background_starter or _start_in_background)(
                    session_id=session_id,
                    reason=reason,
                    debounce_token=debounce_token,
                    delay=countdown,
                )
            elif broker_breaker.allows():
                with broker_breaker.watch():
                    current_app.send_task(
                        EVALUATE_TASK,
                        args=[session_id, reason, debounce_token],
                        countdown=countdown,
                        retry=False,
                    )
        except Exception:
            logger.warning(
                "could not enqueue the evaluation of session %s; the sweep will", session_id
            )

    transaction.on_commit(send)


# Called with the keywords session_id, reason, debounce_token and delay (seconds).
BackgroundStarter = Callable[..., None]
_background_starter: BackgroundStarter | None = None


def set_background_starter(starter: BackgroundStarter | None) -> BackgroundStarter | None:
    """Set how the embedded mode starts an evaluation it enqueues: ``starter`` is called,
    after commit, with the keywords ``session_id``, ``reason``, ``debounce_token`` and
    ``delay`` instead of starting the timer thread; ``None`` brings the timer back.
    Returns the starter it replaces (``None`` for the timer). Where a worker runs the
    tasks it changes nothing."""
    global _background_starter
    previous, _background_starter = _background_starter, starter
    return previous


def _start_in_background(
    *, session_id: int, reason: str, debounce_token: str | None, delay: float
) -> None:
    timer = threading.Timer(
        delay,
        _evaluate_in_background,
        kwargs={"session_id": session_id, "reason": reason, "debounce_token": debounce_token},
    )
    timer.name = f"evaluate-session-{session_id}"
    timer.daemon = True
    timer.start()


def _evaluate_in_background(*, session_id: int, reason: str, debounce_token: str | None) -> None:
    try:
        run_evaluation(session_id=session_id, reason=reason, debounce_token=debounce_token)
    except Exception:
        logger.exception("evaluation of session %s failed", session_id)
    finally:
        connections.close_all()  # this thread's connections only


# --- the sweep ------------------------------------------------------------------------------

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
    for name in leases.expired(leases.TURN_LEASE_PREFIX):
        held = leases.take_expired(name)
        if held is None:
            continue
        try:
            if record_interrupted_turn(session_id=int(name.removeprefix(leases.TURN_LEASE_PREFIX))):
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
    global _sweeper
    with _sweeper_lock:
        if not current_app.conf.task_always_eager or _sweeper is not None:
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
