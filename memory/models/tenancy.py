"""Who owns what: organizations (their members) and their agents (each agent's identity,
model settings, MCP servers and memory token budget)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

DEFAULT_MEMORY_TOKEN_BUDGET = 1500


class Organization(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="organizations", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def validate_mcp_server_names(value: object) -> None:
    """An agent names MCP servers; only the deployment configuration says what they run."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValidationError("expected a list of MCP server names, not server definitions")
    unknown = sorted(set(value) - set(settings.MCP_SERVERS))
    if unknown:
        declared = ", ".join(sorted(settings.MCP_SERVERS)) or "none"
        raise ValidationError(
            f"not declared in the deployment configuration: {', '.join(unknown)} "
            f"(declared: {declared})"
        )


class AgentQuerySet(models.QuerySet):
    def usable_by(self, user) -> AgentQuerySet:
        """Agents of the organizations the user belongs to."""
        return self.filter(organization__members=user).distinct()


class Agent(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    soul = models.TextField(
        "SOUL identity", help_text="Who the agent is: the first block of every context stack."
    )
    skills = models.TextField(blank=True, help_text="What the agent is good at, in plain text.")
    model_name = models.CharField(
        max_length=200, blank=True, help_text="Chat model; blank uses DRIFTLESS_MODEL."
    )
    endpoint = models.ForeignKey(
        "memory.ModelEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="agents",
        help_text="Where its models answer; blank: the deployment's (OPENAI_BASE_URL, or the "
        "local model, or the offline one). A change applies from the next turn.",
    )
    summary_model_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="Model for summaries, drift and consolidation; blank: the chat model.",
    )
    temperature = models.FloatField(null=True, blank=True)
    mcp_servers = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_mcp_server_names],
        help_text="Names of the MCP servers this agent uses, from those the operator declares "
        "in the deployment configuration (DRIFTLESS_MCP_SERVERS).",
    )
    memory_token_budget = models.PositiveIntegerField(
        default=DEFAULT_MEMORY_TOKEN_BUDGET,
        help_text="Approximate token cap of the persistent-memory block (oldest dropped first).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AgentQuerySet.as_manager()

    class Meta:
        ordering = ["organization__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"], name="agent_name_unique_in_org"
            )
        ]

    def __str__(self) -> str:
        return self.name
