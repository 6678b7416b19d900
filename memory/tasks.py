"""Celery tasks of the memory domain: thin, taking ids, calling one domain function."""

from celery import shared_task

from memory.pipeline import run_evaluation


@shared_task(name="memory.evaluate_session", ignore_result=True)
def evaluate_session_task(session_id: int, reason: str, debounce_token: str | None = None) -> str:
    """Evaluate a session's active topic (drift, then fork or refresh); returns the action.

    ``debounce_token`` is set by exit triggers: the task does nothing when a later trigger
    for the same session has replaced it.
    """
    outcome = run_evaluation(session_id=session_id, reason=reason, debounce_token=debounce_token)
    return outcome.action
