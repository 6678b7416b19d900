"""Durable facts: the key-value document of a scope, who set each fact, and its history.

``ImportantInfo.data`` is what the model reads (key to JSON value, one document per
(user, agent, organization)); ``provenance`` beside it says, per key, who last set the
fact (an actor), when, and from which topic. Both are read in one query on every turn.
The older values live in ``FactChange`` rows, one per change, the newest
``MAX_FACT_HISTORY`` of each key kept: they are read only when someone asks (the agent's
``important_info`` read of a key, the REST history, admin).

The rule of the guard is here, on the row: a fact the user set (themselves, or by
importing their own export) is theirs; the agent may change only what it or the
consolidator set (memory/stores/facts.py refuses the rest).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

# How many changes of one key are kept (the newest).
MAX_FACT_HISTORY = 10


class FactActor(models.TextChoices):
    """Who set a fact."""

    USER = "user", "User"
    AGENT = "agent", "Agent"
    IMPORT = "import", "Import"
    CONSOLIDATOR = "consolidator", "Consolidator"


# The actors whose facts the agent may change: machine-made ones.
AGENT_MAY_CHANGE = frozenset({FactActor.AGENT, FactActor.CONSOLIDATOR})


class ImportantInfo(models.Model):
    """Durable facts: one key-value document per (user, agent, organization)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="important_info"
    )
    agent = models.ForeignKey(
        "memory.Agent", on_delete=models.CASCADE, related_name="important_info"
    )
    organization = models.ForeignKey(
        "memory.Organization", on_delete=models.CASCADE, related_name="important_info"
    )
    data = models.JSONField(default=dict, blank=True)
    provenance = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="Per key: who last set the fact (actor), when (set_at) and from which "
        "topic (topic_id). Facts stored before provenance was kept have none.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "important info"
        verbose_name_plural = "important info"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "agent", "organization"], name="one_facts_document_per_scope"
            )
        ]

    def __str__(self) -> str:
        return f"Facts of {self.user} with {self.agent}"

    def set_by(self, key: str) -> str | None:
        """The actor who last set ``key``; None for a fact older than provenance."""
        return (self.provenance or {}).get(key, {}).get("actor")

    def agent_may_change(self, key: str) -> bool:
        """A new key, or one the agent or the consolidator set. A fact the user set, or
        one from before provenance was kept (it may be the user's), is not the agent's."""
        return key not in (self.data or {}) or self.set_by(key) in AGENT_MAY_CHANGE

    def record(self, key: str, *, actor: str, topic_id: int | None) -> dict[str, Any]:
        """Note that ``key`` was just set: the provenance entry it now has."""
        entry = {"actor": str(actor), "set_at": timezone.now().isoformat(), "topic_id": topic_id}
        self.provenance = {**(self.provenance or {}), key: entry}
        return entry

    def forget(self, key: str) -> None:
        self.provenance = {k: v for k, v in (self.provenance or {}).items() if k != key}


class FactChange(models.Model):
    """One change of one fact: who, when, from which topic, the value before and after."""

    class Action(models.TextChoices):
        SET = "set", "Set"
        UNSET = "unset", "Removed"

    document = models.ForeignKey(ImportantInfo, on_delete=models.CASCADE, related_name="changes")
    key = models.TextField()
    action = models.CharField(max_length=8, choices=Action.choices)
    actor = models.CharField(max_length=12, choices=FactActor.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who acted: the scope's user, or the operator who edited it in admin.",
    )
    topic = models.ForeignKey(
        "memory.Topic", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    old_value = models.JSONField(null=True, blank=True, help_text="Empty: the key was new.")
    new_value = models.JSONField(null=True, blank=True, help_text="Empty: the fact was removed.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["document", "key", "-created_at"], name="fact_change_key_idx")
        ]

    def __str__(self) -> str:
        return f"{self.actor}: {self.action} {self.key}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "actor": self.actor,
            "at": self.created_at.isoformat(),
            "topic_id": self.topic_id,
            "old_value": self.old_value,
            "new_value": self.new_value,
        }
