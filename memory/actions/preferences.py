"""A user's preferences of the chat page (memory/models/preferences.py), read and changed
by the user only: the brain legend's "Got it" and the colour theme follow the user from
browser to browser."""

from __future__ import annotations

from typing import Any

from memory.lib.errors import InvalidInput
from memory.models import Preferences

FIELDS = ("brain_legend_seen", "theme")


def preferences_of(user) -> dict[str, Any]:
    """The user's preferences, the defaults when none was ever set (nothing is written)."""
    found = Preferences.objects.filter(user_id=user.pk).first() or Preferences(user_id=user.pk)
    return {"brain_legend_seen": found.brain_legend_seen, "theme": found.theme}


def do_set_preferences(*, user, changes: dict[str, Any]) -> dict[str, Any]:
    """Change some of the user's preferences; InvalidInput for an unknown one or a value
    it cannot take (nothing is changed then)."""
    unknown = sorted(set(changes) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"unknown preference: {unknown[0]}", field=unknown[0])
    if "brain_legend_seen" in changes and not isinstance(changes["brain_legend_seen"], bool):
        raise InvalidInput("expected true or false", field="brain_legend_seen")
    if "theme" in changes and changes["theme"] not in Preferences.Theme.values:
        expected = ", ".join(Preferences.Theme.values)
        raise InvalidInput(f"expected one of {expected}", field="theme")
    if changes:
        Preferences.objects.update_or_create(user_id=user.pk, defaults=changes)
    return preferences_of(user)
