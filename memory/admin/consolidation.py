"""Django admin for consolidation runs: what each run proposed, applied and refused.

Registered from memory/admin/__init__.py (one import), kept apart so the consolidator's
admin grows without pushing that file past its limit. Runs are read-only records; an operator may
start a consolidation of a session's scope (an action on sessions) or of the scopes of
selected runs, and undo a run, each through memory/actions/consolidation/run.py, as the
user's REST call does. A refusal (a run that cannot be undone) is a message on the page,
and nothing changes.
"""

import json

from django.contrib import admin, messages
from django.utils.html import format_html

from memory.actions.consolidation import do_consolidate, do_undo_consolidation
from memory.admin.scope import KeptAuditTrail, OperatorActions, OrganizationScoped
from memory.lib.errors import Refused
from memory.models import ConsolidationRun, MemoryDecision


class ConsolidationDecisionInline(admin.TabularInline):
    model = MemoryDecision
    fk_name = "consolidation"
    fields = ["created_at", "action", "actor", "user", "topic", "topic_title", "from_state"]
    fields += ["to_state"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "memory decisions of this run"

    def has_add_permission(self, request, obj=None):
        return False


def _pretty(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, ensure_ascii=False, indent=2))


def _scopes(runs_or_sessions) -> list[tuple]:
    """The distinct (agent, user) scopes of the rows, in a stable order."""
    seen = {(row.agent_id, row.user_id): (row.agent, row.user) for row in runs_or_sessions}
    return [seen[key] for key in sorted(seen)]


def _consolidate(modeladmin, request, rows) -> None:
    for agent, user in _scopes(rows.select_related("agent", "user")):
        run = do_consolidate(
            agent=agent,
            user=user,
            requested_by=request.user,
            trigger=ConsolidationRun.Trigger.ADMIN,
        )
        level = messages.SUCCESS if run.status == ConsolidationRun.Status.APPLIED else messages.INFO
        modeladmin.message_user(
            request,
            f"{user} with {agent}: {run.get_status_display()} ({len(run.applied)} applied, "
            f"{len(run.refused)} refused){': ' + run.detail if run.detail else ''}",
            level,
        )


@admin.action(description="Consolidate the memory of these scopes now", permissions=["consolidate"])
def consolidate_scopes(modeladmin, request, queryset):
    _consolidate(modeladmin, request, queryset)


@admin.action(description="Undo the selected consolidation runs", permissions=["consolidate"])
def undo_runs(modeladmin, request, queryset):
    for run in queryset.order_by("-created_at", "-pk"):  # the newest first
        try:
            do_undo_consolidation(run=run, user=request.user)
        except Refused as refused:
            modeladmin.message_user(request, f"Run {run.pk}: {refused.message}", messages.ERROR)
        else:
            modeladmin.message_user(request, f"Run {run.pk} undone.", messages.SUCCESS)


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(OperatorActions, KeptAuditTrail, OrganizationScoped, admin.ModelAdmin):
    list_display = [
        "created_at",
        "user",
        "agent",
        "status",
        "trigger",
        "entries_sent",
        "applied_count",
        "refused_count",
        "requested_by",
    ]
    list_filter = ["status", "trigger", "agent", "organization"]
    search_fields = ["user__username", "agent__name", "detail"]
    fields = [
        "user",
        "agent",
        "organization",
        "status",
        "trigger",
        "requested_by",
        "model_name",
        "detail",
        "entries_sent",
        "applied_view",
        "refused_view",
        "proposal_view",
        "block_before_view",
        "block_after_view",
        "created_at",
        "finished_at",
        "undone_at",
        "undone_by",
    ]
    readonly_fields = fields
    inlines = [ConsolidationDecisionInline]
    actions = [undo_runs, consolidate_scopes]

    @admin.display(description="applied")
    def applied_count(self, run):
        return len(run.applied)

    @admin.display(description="refused")
    def refused_count(self, run):
        return len(run.refused)

    @admin.display(description="applied operations (before and after)")
    def applied_view(self, run):
        return _pretty(run.applied)

    @admin.display(description="refused operations (with the reason)")
    def refused_view(self, run):
        return _pretty(run.refused)

    @admin.display(description="the model's proposal")
    def proposal_view(self, run):
        return _pretty(run.proposal)

    @admin.display(description="memory block before")
    def block_before_view(self, run):
        return format_html("<pre>{}</pre>", run.block_before)

    @admin.display(description="memory block after")
    def block_after_view(self, run):
        return format_html("<pre>{}</pre>", run.block_after)
