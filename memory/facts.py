"""Durable facts: the one key-value document per (user, agent, organization).

Facts are injected into the stable prefix of every turn at full fidelity and never
summarized, so they are kept small and checked on the way in: a key is a short
non-empty string, a value is any JSON value of bounded size. The organization is always
the agent's, so a fact can never leak into another organization's scope.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from memory.models import ImportantInfo

MAX_FACT_KEY_LENGTH = 200
# Every fact costs tokens on every turn of every session in the scope.
MAX_FACT_VALUE_CHARS = 2000


class FactError(ValueError):
    """A fact that cannot be stored; the message says why, for the model or the user."""


def read_facts(*, user, agent) -> dict[str, Any]:
    """The scope's facts ({} when none were ever stored)."""
    data = (
        ImportantInfo.objects.filter(user=user, agent=agent, organization_id=agent.organization_id)
        .values_list("data", flat=True)
        .first()
    )
    return dict(data or {})


def check_fact_key(key: object) -> str:
    """The key as stored (surrounding blanks trimmed), or FactError."""
    if not isinstance(key, str) or not key.strip():
        raise FactError("key must be a non-empty string")
    key = key.strip()
    if len(key) > MAX_FACT_KEY_LENGTH:
        raise FactError(f"key is longer than {MAX_FACT_KEY_LENGTH} characters")
    return key


def check_fact_value(value: object) -> Any:
    if value is None:
        raise FactError("value is missing; to delete a fact use $unset")
    try:
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise FactError(
            "value must be a JSON value (text, number, boolean, list or object)"
        ) from err
    if len(encoded) > MAX_FACT_VALUE_CHARS:
        raise FactError(
            f"value is longer than {MAX_FACT_VALUE_CHARS} characters; store the gist, "
            "or keep long working context in notes"
        )
    return value


def set_fact(*, user, agent, key: str, value: Any) -> dict:
    """Create or update one entry; returns the whole document after the change."""
    key = check_fact_key(key)
    value = check_fact_value(value)
    with transaction.atomic():
        document = _locked_document(user=user, agent=agent)
        document.data = {**(document.data or {}), key: value}
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


def _locked_document(*, user, agent) -> ImportantInfo:
    """The scope's document, created on first use, locked until the transaction ends."""
    document, _ = ImportantInfo.objects.select_for_update().get_or_create(
        user=user, agent=agent, organization_id=agent.organization_id
    )
    return document
