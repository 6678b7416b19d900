"""Durable facts: the one key-value document per (user, agent, organization).

Facts are injected into the stable prefix of every turn at full fidelity and never
summarized, so they are kept small and checked on the way in (memory/lib/limits.py): a key is
short non-empty text, a value any JSON value of bounded size, and the document holds at
most ``MAX_FACTS`` facts and ``MAX_FACTS_TOKENS`` tokens as the model reads it. The
organization is always the agent's, so a fact can never leak into another organization's
scope.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from memory.lib.errors import InvalidInput
from memory.lib.limits import MAX_FACT_KEY_CHARS, MAX_FACT_VALUE_CHARS, MAX_FACTS, MAX_FACTS_TOKENS
from memory.lib.tokens import estimate_tokens
from memory.lib.validation import check_json_value, check_unicode
from memory.models import ImportantInfo


class FactError(InvalidInput):
    """A fact that cannot be stored; the message says why, for the model or the user.

    ``details`` says which limit was met and how much room is left, for the agent's tool.
    """

    def __init__(
        self, message: str, *, field: str = "value", code: str = "invalid", details=None
    ) -> None:
        super().__init__(message, field=field, code=code)
        self.details: dict[str, Any] = details or {}


def read_facts(*, user, agent) -> dict[str, Any]:
    """The scope's facts ({} when none were ever stored)."""
    data = (
        ImportantInfo.objects.filter(user=user, agent=agent, organization_id=agent.organization_id)
        .values_list("data", flat=True)
        .first()
    )
    return dict(data or {})


def render_fact_lines(data: dict[str, Any]) -> list[str]:
    """The facts as the model reads them, one ``- key: value`` line each, sorted by key."""
    return [f"- {key}: {_fact_value(data[key])}" for key in sorted(data)]


def facts_tokens(data: dict[str, Any]) -> int:
    """Approximate tokens of the facts document as the model reads it."""
    return estimate_tokens("\n".join(render_fact_lines(data)))


def check_fact_key(key: object) -> str:
    """The key as stored (surrounding blanks trimmed), or FactError."""
    if not isinstance(key, str) or not key.strip():
        raise FactError("key must be a non-empty string", field="key", code="wrong_type")
    try:
        check_unicode(key, field="key")
    except InvalidInput as err:
        raise FactError(err.message, field="key", code=err.code) from err
    key = key.strip()
    if len(key) > MAX_FACT_KEY_CHARS:
        raise FactError(
            f"key is longer than {MAX_FACT_KEY_CHARS} characters", field="key", code="too_long"
        )
    return key


def check_fact_value(value: object) -> Any:
    if value is None:
        raise FactError("value is missing; to delete a fact use $unset", code="empty")
    if isinstance(value, str) and not value.strip():
        raise FactError("a fact needs a value; to delete a fact use $unset", code="empty")
    try:
        check_json_value(value, field="value")
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except InvalidInput as err:
        raise FactError(err.message, code=err.code) from err
    except (TypeError, ValueError) as err:
        raise FactError(
            "value must be a JSON value (text, number, boolean, list or object)", code="wrong_type"
        ) from err
    if len(encoded) > MAX_FACT_VALUE_CHARS:
        raise FactError(
            f"value is longer than {MAX_FACT_VALUE_CHARS} characters; store the gist, "
            "or keep long working context in notes",
            code="too_long",
            details={"limit": "fact value characters", "max": MAX_FACT_VALUE_CHARS},
        )
    return value


def check_facts_document(data: object) -> dict[str, Any]:
    """A whole document (as admin edits it): every key and value checked, within the
    fact count and the token budget."""
    if not isinstance(data, dict):
        raise FactError("the facts document must be a JSON object", field="facts")
    checked: dict[str, Any] = {}
    for key, value in data.items():
        checked[check_fact_key(key)] = check_fact_value(value)
    check_facts_limits(checked, before={})
    return checked


def set_fact(*, user, agent, key: str, value: Any) -> dict:
    """Create or update one entry; returns the whole document after the change."""
    key = check_fact_key(key)
    value = check_fact_value(value)
    with transaction.atomic():
        document = _locked_document(user=user, agent=agent)
        before = dict(document.data or {})
        after = {**before, key: value}
        check_facts_limits(after, before=before)
        document.data = after
        document.save(update_fields=["data", "updated_at"])
    return dict(document.data)


def unset_fact(*, user, agent, key: str) -> bool:
    """Delete one entry; False when there was none under that key."""
    key = check_fact_key(key)
    with transaction.atomic():
        document = (
            ImportantInfo.objects.select_for_update()
            .filter(user=user, agent=agent, organization_id=agent.organization_id)
            .first()
        )
        if document is None or key not in (document.data or {}):
            return False
        document.data = {k: v for k, v in document.data.items() if k != key}
        document.save(update_fields=["data", "updated_at"])
    return True


def check_facts_limits(after: dict[str, Any], *, before: dict[str, Any]) -> None:
    """``after`` replacing ``before`` (a set, an import, an admin edit), or FactError.

    Refuse a document past the fact count or the token budget, saying how much room
    is left. A change that shrinks an over-limit document (limits lowered) is let through."""
    if len(after) > MAX_FACTS and len(after) > len(before):
        raise FactError(
            f"there are already {len(before)} facts, the limit is {MAX_FACTS}; "
            "$unset facts that no longer matter first",
            field="facts",
            code="too_many_facts",
            details={"limit": "facts", "max": MAX_FACTS, "used": len(before), "room": 0},
        )
    tokens = facts_tokens(after)
    used = facts_tokens(before)
    if tokens > MAX_FACTS_TOKENS and tokens > used:
        room = max(MAX_FACTS_TOKENS - used, 0)
        raise FactError(
            f"the facts would take about {tokens} tokens, the limit is {MAX_FACTS_TOKENS} "
            f"({used} used, {room} left); shorten the value or $unset facts that no longer "
            "matter",
            field="facts",
            code="facts_over_budget",
            details={"limit": "facts tokens", "max": MAX_FACTS_TOKENS, "used": used, "room": room},
        )


def _fact_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _locked_document(*, user, agent) -> ImportantInfo:
    """The scope's document, created on first use, locked until the transaction ends."""
    document, _ = ImportantInfo.objects.select_for_update().get_or_create(
        user=user, agent=agent, organization_id=agent.organization_id
    )
    return document
