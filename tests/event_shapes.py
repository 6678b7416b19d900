"""The documented shape of every websocket event (docs/websocket-events.schema.json,
generated from memory/events.py), and a checker the suite wraps around the publisher
(tests/conftest.py)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "docs" / "websocket-events.schema.json"


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def event_types() -> set[str]:
    return set(schema()["discriminator"]["mapping"])


@cache
def _validator(event_type: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": schema()["discriminator"]["mapping"][event_type], "$defs": schema()["$defs"]},
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def event_problems(event: object) -> list[str]:
    """What differs between ``event`` and its documented shape ([] when nothing)."""
    event_type = event.get("type") if isinstance(event, dict) else None
    if event_type not in event_types():
        return [f"undocumented event type {event_type!r}: {event!r}"[:500]]
    return [
        f"{event_type} at /{'/'.join(map(str, error.absolute_path))}: {error.message}"[:500]
        for error in _validator(event_type).iter_errors(event)
    ]


def checked_recorder(published, into: list):
    """A stand-in for ``publish``/``publish_on_commit`` that records each event in ``into``
    and still holds it to the schema: a test that intercepts events keeps the check on."""

    def record(session_id, event, *, hold: bool = False) -> None:
        published.check(event, record=False)
        into.append(event)

    return record
