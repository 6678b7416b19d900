"""Consolidation runs: one record per pass over a scope's persistent memory.

A run is the audit of one consolidation (memory/actions/consolidation/run.py): who asked,
what the model proposed, which operations were applied and which were refused (an entry
the user curated is never changed by the consolidator), the state of every topic it
touched before and after, and the scope's memory block before and after. What it keeps
is enough to undo it exactly: ``snapshot`` holds the touched topics' fields as they were,
``result`` as the run left them; an undo puts ``snapshot`` back when the topics still
hold ``result`` (nobody changed them since), so the block is byte for byte the one
before the run. ``fact_snapshot`` and ``fact_result`` do the same for the durable facts a
run updated or marked outdated (value, provenance and history).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ConsolidationRunQuerySet(models.QuerySet):
    def of_scope(self, *, agent_id: int, user_id: int, organization_id: int):
        return self.filter(agent_id=agent_id, user_id=user_id, organization_id=organization_id)

    def owned_by(self, user) -> ConsolidationRunQuerySet:
        """Runs of the caller's own scopes, in organizations they still belong to."""
        if user is None or not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user, user__is_active=True, organization__members=user)


class ConsolidationRun(models.Model):
    """One consolidation of one (agent, user, organization) scope, and how to undo it."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        APPLIED = "applied", "Applied"
        NOTHING = "nothing", "Nothing to change"
        UNUSABLE = "unusable", "Unusable answer (nothing changed)"
        FAILED = "failed", "Model failed (nothing changed)"
        STALE = "stale", "Memory kept changing (nothing changed)"
        UNDONE = "undone", "Undone"

    class Trigger(models.TextChoices):
        USER = "user", "The user (REST)"
        ADMIN = "admin", "An operator (admin)"
        COMMAND = "command", "A management command"
        AUTO = "auto", "Automatic (after promotions)"

    agent = models.ForeignKey(
        "memory.Agent", on_delete=models.CASCADE, related_name="consolidation_runs"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="consolidation_runs"
    )
    organization = models.ForeignKey(
        "memory.Organization", on_delete=models.CASCADE, related_name="consolidation_runs"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who asked: the scope's user, or the operator (admin).",
    )
    trigger = models.CharField(max_length=8, choices=Trigger.choices, default=Trigger.USER)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.RUNNING)
    model_name = models.CharField(max_length=200, blank=True)
    detail = models.TextField(blank=True, help_text="Why nothing changed, when nothing did.")
    entries_sent = models.PositiveIntegerField(
        default=0, help_text="Promoted entries the model was shown."
    )
    proposal = models.JSONField(
        default=list, blank=True, help_text="The operations the model proposed, as it said them."
    )
    applied = models.JSONField(
        default=list, blank=True, help_text="The operations applied, with before and after."
    )
    refused = models.JSONField(
        default=list,
        blank=True,
        help_text="Proposed operations refused, each with the reason (e.g. the user curated "
        "the entry).",
    )
    snapshot = models.JSONField(
        default=dict, blank=True, help_text="Per touched topic id: its fields before the run."
    )
    result = models.JSONField(
        default=dict, blank=True, help_text="Per touched topic id: its fields after the run."
    )
    fact_snapshot = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per fact key the run changed: its value, provenance and history before.",
    )
    fact_result = models.JSONField(
        default=dict, blank=True, help_text="Per fact key the run changed: its value after."
    )
    block_before = models.TextField(blank=True, help_text="The scope's memory block before.")
    block_after = models.TextField(blank=True, help_text="The scope's memory block after.")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = ConsolidationRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(
                fields=["agent", "user", "organization", "-created_at"],
                name="consolidation_scope_idx",
            )
        ]

    def __str__(self) -> str:
        return f"Consolidation {self.pk} of {self.user_id} with {self.agent_id}: {self.status}"

    @property
    def scope_key(self) -> str:
        """The ``agentId:userId:orgId`` key of the scope (Session.memory_scope_key)."""
        return f"{self.agent_id}:{self.user_id}:{self.organization_id}"

    @property
    def undoable(self) -> bool:
        return self.status == self.Status.APPLIED
