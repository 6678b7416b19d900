"""The audit trails: memory decisions (who moved which topic from which memory state to
which, or edited it) and deletions (who deleted what, and how much, never the content)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from memory.models.conversation import MemoryState, Topic
from memory.models.tenancy import Agent, Organization


class MemoryDecision(models.Model):
    """Audit trail: who moved which topic from which memory state to which, or edited its
    title and summary (``action`` edit: the states are the topic's state at the time)."""

    class Actor(models.TextChoices):
        USER = "user", "User"
        AGENT = "agent", "Agent"
        SUMMARIZER = "summarizer", "Summarizer"
        CONSOLIDATOR = "consolidator", "Consolidator"

    class Action(models.TextChoices):
        STATE = "state", "Memory state changed"
        EDIT = "edit", "Title or summary edited"

    action = models.CharField(max_length=8, choices=Action.choices, default=Action.STATE)

    topic = models.ForeignKey(
        Topic, null=True, on_delete=models.SET_NULL, related_name="memory_decisions"
    )
    topic_title = models.CharField(max_length=200, blank=True, help_text="Title at the time.")
    actor = models.CharField(max_length=12, choices=Actor.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    from_state = models.CharField(max_length=12, choices=MemoryState.choices)
    to_state = models.CharField(max_length=12, choices=MemoryState.choices)
    consolidation = models.ForeignKey(
        "memory.ConsolidationRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="decisions",
        help_text="The consolidation run that made (or undid) this decision.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        if self.action == self.Action.EDIT:
            return f"{self.actor}: edited ({self.topic_title})"
        return f"{self.actor}: {self.from_state} → {self.to_state} ({self.topic_title})"


class Deletion(models.Model):
    """Audit row of a deleted session or topic: who, what, how much, never the content.

    The ids are the deleted rows' own (kept as plain numbers: the rows are gone)."""

    class Kind(models.TextChoices):
        SESSION = "session", "Session"
        TOPIC = "topic", "Topic"

    class Via(models.TextChoices):
        USER = "user", "The user (page or API)"
        OPERATOR = "operator", "An operator (admin)"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    via = models.CharField(max_length=8, choices=Via.choices)
    session_ref = models.PositiveBigIntegerField(help_text="Id of the (deleted) session.")
    topic_ref = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Id of the deleted topic (a topic deletion)."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    organization = models.ForeignKey(
        Organization, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    topics = models.PositiveIntegerField(help_text="Topics deleted.")
    messages = models.PositiveIntegerField(help_text="Messages deleted.")
    memory_topics = models.PositiveIntegerField(
        help_text="Deleted topics that were in persistent memory (promoted or deprecated)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        what = f"topic {self.topic_ref} of session" if self.topic_ref else "session"
        return f"{what} {self.session_ref} deleted by {self.get_via_display().lower()}"
