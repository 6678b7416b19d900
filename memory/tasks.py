"""Celery tasks of the memory domain: thin, taking ids, calling one domain function."""

from celery import shared_task

from memory.actions.backfill import BACKFILL_BATCH, do_backfill_vectors
from memory.actions.evaluation import run_evaluation
from memory.actions.scheduling import EVALUATE_TASK, SWEEP_TASK, sweep

BACKFILL_TASK = "memory.backfill_vectors"
#: Vectors one run of the task stores before it hands the rest to a new run (a worker is
#: never held for hours, and a lost run loses at most this much work).
BACKFILL_RUN = 5_000


@shared_task(name=EVALUATE_TASK, ignore_result=True)
def evaluate_session_task(session_id: int, reason: str, debounce_token: str | None = None) -> str:
    """Evaluate a session's active topic (drift, then fork or refresh); returns the action.

    ``debounce_token`` is set by exit triggers: the task does nothing when a later trigger
    for the same session has replaced it.
    """
    outcome = run_evaluation(session_id=session_id, reason=reason, debounce_token=debounce_token)
    return outcome.action


@shared_task(name=SWEEP_TASK, ignore_result=True)
def sweep_task() -> dict:
    """The periodic sweep (Celery beat): interrupted turns and overdue evaluations."""
    report = sweep()
    return {"interrupted_turns": report.interrupted_turns, "evaluations": report.evaluations}


@shared_task(name=BACKFILL_TASK, ignore_result=True)
def backfill_vectors_task(batch_size: int = BACKFILL_BATCH, limit: int = BACKFILL_RUN) -> dict:
    """Store up to ``limit`` missing sentence vectors; enqueue the next run while some
    are left (memory/actions/backfill.py)."""
    report = do_backfill_vectors(batch_size=batch_size, limit=limit)
    if not report.done:
        backfill_vectors_task.delay(batch_size, limit)
    return {"messages": report.messages, "topics": report.topics, "done": report.done}
