"""Notes: each topic's scratchpad, injected into the semi-stable prefix every turn.

One active document per topic (the database enforces it). ``append_notes`` logs
decisions as they happen and never overwrites; ``replace_notes`` rewrites the whole
document when understanding has changed. When a topic closes or forks its notes are
archived (``Notes.objects.archive()``, after the summary was made from them): an archived
document stays on disk for traceability but is never injected again.
"""

from __future__ import annotations

from django.db import transaction

from memory.lib.errors import InvalidInput
from memory.lib.limits import MAX_NOTES_CHARS
from memory.lib.validation import check_unicode
from memory.models import Notes, Topic


class NotesError(InvalidInput):
    """Notes that cannot be written; the message says why, for the model or the user."""

    def __init__(self, message: str, *, code: str = "invalid") -> None:
        super().__init__(message, field="content", code=code)


def read_notes(*, topic_id: int) -> str:
    """The topic's active notes ("" when it has none): what its turns and its summary see."""
    content = (
        Notes.objects.active().filter(topic_id=topic_id).values_list("content", flat=True).first()
    )
    return content or ""


def read_latest_notes(*, topic: Topic) -> tuple[str, bool]:
    """The active notes, or else the latest archived ones; and whether they are archived.

    Lets the agent look back at a closed topic's scratchpad by id (its notes were
    archived when it closed) without ever injecting them into the context.
    """
    row = (
        Notes.objects.filter(topic=topic)
        .order_by("archived", "-created_at", "-pk")
        .values_list("content", "archived")
        .first()
    )
    if row is None:
        return "", False
    return row[0], row[1]


def append_notes(*, topic: Topic, text: str) -> str:
    """Add an entry on a new line at the end; returns the whole document."""
    if not isinstance(text, str) or not text.strip():
        raise NotesError("content must be non-empty text", code="empty")
    _check_text(text)
    with transaction.atomic():
        notes = _locked_active_notes(topic=topic)
        content = f"{notes.content}\n{text.strip()}" if notes.content else text.strip()
        _check_size(content)
        notes.content = content
        notes.save(update_fields=["content", "updated_at"])
    return content


def replace_notes(*, topic: Topic, content: str) -> str:
    """Rewrite the whole document (empty content clears it); returns it."""
    check_notes(content)
    with transaction.atomic():
        notes = _locked_active_notes(topic=topic)
        notes.content = content
        notes.save(update_fields=["content", "updated_at"])
    return content


def check_notes(content: object) -> str:
    """A whole notes document (as update or admin writes it)."""
    if not isinstance(content, str):
        raise NotesError("content must be text", code="wrong_type")
    _check_text(content)
    _check_size(content)
    return content


def _check_text(text: str) -> None:
    try:
        check_unicode(text, field="content")
    except InvalidInput as err:
        raise NotesError(err.message, code=err.code) from err


def _check_size(content: str) -> None:
    if len(content) > MAX_NOTES_CHARS:
        raise NotesError(
            f"notes would exceed {MAX_NOTES_CHARS} characters; "
            "use update to replace them with a condensed version",
            code="too_long",
        )


def _locked_active_notes(*, topic: Topic) -> Notes:
    notes, _ = Notes.objects.select_for_update().get_or_create(topic=topic, archived=False)
    return notes
