"""Django admin for operators: inspect everything, change little.

What only the system writes (sequence numbers, token usage, manual-set flags, what a
summary covers, audit rows) is read-only here. A session's active topic cannot be deleted
(every store of the session needs it). Deleting a session or a topic goes through
memory/actions/deletion.py, as the user's own deletion does: never in the middle of one of
the session's turns (the session lock), its topics leave memory (the scope's cache is
invalidated) and a ``Deletion`` audit row (without the content) remains. An operator's
edit of a topic's title or summary is a correction like the user's
(memory/actions/curation.py): audited, and kept by later summaries of the same messages.

What the domain refuses (memory/lib/errors.py) is shown here once, the admin's way: a
form error on the field it names, or a message on the page and nothing changed.
"""

import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as delete_selected_action
from django.contrib.admin.utils import unquote
from django.db.models import Count
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from memory.actions.curation import do_user_edit_topic
from memory.actions.deletion import do_delete_session, do_delete_topic
from memory.actions.portability import export_memory
from memory.admin.consolidation import consolidate_scopes
from memory.admin.endpoints import model_profile
from memory.admin.scope import (
    AuditTrail,
    KeptAuditTrail,
    OperatorActions,
    OrganizationScoped,
    SuperuserChanges,
    confine_auth_admin,
)
from memory.lib.errors import ACTIVE_TOPIC_DELETE_ERROR, Refused
from memory.lib.validation import check_summary, check_title, check_topic_title
from memory.llm import get_chat_model
from memory.models import (
    Agent,
    Deletion,
    FactActor,
    FactChange,
    ImportantInfo,
    MemoryDecision,
    Message,
    Notes,
    Organization,
    Session,
    Topic,
)
from memory.models.facts import MAX_FACT_HISTORY
from memory.stores.facts import check_facts_document, replace_facts
from memory.stores.messages import shown_session_title, usage_totals, with_list_fields
from memory.stores.notes import check_notes


def checked_form(model, **checks) -> type[forms.ModelForm]:
    """A model form whose fields also pass the domain's checks (memory/lib/validation.py), so
    admin accepts exactly what REST, the socket and the agent's tools accept."""

    def clean(self):
        data = forms.ModelForm.clean(self)
        for name, check in checks.items():
            if name in data:
                try:
                    data[name] = check(data[name])
                except Refused as refused:
                    self.add_error(name, refused.message)
        return data

    meta = type("Meta", (), {"model": model, "fields": "__all__"})
    return type(f"{model.__name__}CheckedForm", (forms.ModelForm,), {"Meta": meta, "clean": clean})


class MemoryStateFilter(admin.SimpleListFilter):
    title = "memory state"
    parameter_name = "memory_state"

    def lookups(self, request, model_admin):
        return [("none", "Not in memory"), ("promoted", "Promoted"), ("deprecated", "Deprecated")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(keep_in_memory=False, deprecated=False)
        if self.value() == "promoted":
            return queryset.filter(keep_in_memory=True, deprecated=False)
        if self.value() == "deprecated":
            return queryset.filter(deprecated=True)
        return queryset


@admin.register(Organization)
class OrganizationAdmin(SuperuserChanges, OrganizationScoped, admin.ModelAdmin):
    organization_path = "pk"
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    filter_horizontal = ["members"]


def _declared_mcp_servers() -> list[tuple[str, str]]:
    return [
        (name, f"{name} ({'command' if 'command' in spec else spec['url']})")
        for name, spec in sorted(settings.MCP_SERVERS.items())
    ]


class AgentForm(forms.ModelForm):
    # Staff choose among the servers the operator declared; a command or a URL cannot
    # be typed here (see MCP_SERVERS in driftless/settings.py).
    mcp_servers = forms.MultipleChoiceField(
        choices=_declared_mcp_servers,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="MCP servers",
        help_text="Declared by the operator in DRIFTLESS_MCP_SERVERS; none when empty.",
    )

    class Meta:
        model = Agent
        fields = [
            "organization",
            "name",
            "soul",
            "skills",
            "endpoint",
            "model_name",
            "summary_model_name",
            "temperature",
            "mcp_servers",
            "memory_token_budget",
        ]

    def clean(self):
        data = super().clean()
        endpoint = data.get("endpoint")
        for field in ("model_name", "summary_model_name"):
            name = (data.get(field) or "").strip()
            if endpoint is not None and name and name not in endpoint.models:
                served = ", ".join(endpoint.models)
                self.add_error(field, f"{endpoint.name} offers {served}: pick one of them.")
        return data


@admin.register(Agent)
class AgentAdmin(SuperuserChanges, OrganizationScoped, admin.ModelAdmin):
    form = AgentForm
    list_display = ["name", "organization", "endpoint", "model_name", "memory_token_budget"]
    readonly_fields = ["model_profile"]

    @admin.display(description="model profile")
    def model_profile(self, agent):
        return model_profile(get_chat_model("chat", agent=agent).name) or "—"

    list_filter = ["organization"]
    search_fields = ["name", "soul", "skills"]


class TopicInline(admin.TabularInline):
    model = Topic
    fields = ["title", "memory_state_label", "is_active", "origin", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(description="memory")
    def memory_state_label(self, topic):
        return topic.memory_state.label


@admin.action(
    description="Export the memory of this scope, with whole sessions (JSON)",
    permissions=["export"],
)
def export_scope_memory(modeladmin, request, queryset):
    scopes = {(s.user, s.agent) for s in queryset.select_related("user", "agent")}
    if len(scopes) != 1:
        modeladmin.message_user(
            request, "Select sessions of one user and agent: one scope a file.", messages.ERROR
        )
        return None
    [(user, agent)] = scopes
    document = export_memory(user=user, agent=agent, include_sessions=True)
    response = HttpResponse(
        json.dumps(document, ensure_ascii=False, indent=2), content_type="application/json"
    )
    filename = f"driftless-memory-{agent.pk}-{user.pk}.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@admin.register(Session)
class SessionAdmin(OperatorActions, OrganizationScoped, admin.ModelAdmin):
    list_display = [
        "shown_title",
        "user",
        "agent",
        "organization",
        "shown_messages",
        "cache_hit_rate",
        "updated_at",
    ]
    list_filter = ["agent", "organization", "user"]
    search_fields = ["title", "user__username", "agent__name"]
    form = checked_form(Session, title=check_title)
    # The user's pick of a model is theirs (the chat page): shown, never changed here, and
    # the endpoint itself (superusers' only) is not offered to organization operators.
    exclude = ["model_endpoint"]
    readonly_fields = [
        "model_name",
        "message_count",
        "drift_result",
        "cache_hit_rate",
        "created_at",
        "updated_at",
    ]
    inlines = [TopicInline]

    actions = [export_scope_memory, consolidate_scopes, "delete_selected"]

    def get_queryset(self, request):
        return with_list_fields(super().get_queryset(request))

    @admin.display(description="Title", ordering="title")
    def shown_title(self, obj: Session) -> str:
        """The title the user sees (an untitled session's automatic one), not "Session 6"."""
        return shown_session_title(obj)

    @admin.display(description="Messages", ordering="shown_messages")
    def shown_messages(self, obj: Session) -> int:
        """The messages the chat's sidebar counts: the conversation, no tool activity."""
        return obj.shown_messages

    def delete_model(self, request, obj):
        do_delete_session(session=obj, deleted_by=request.user, via=Deletion.Via.OPERATOR)

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except Refused as refused:  # a turn of the session is running: nothing deleted
            self.message_user(request, f"Not deleted: {refused.message}", messages.ERROR)
            return HttpResponseRedirect(reverse("admin:memory_session_change", args=[object_id]))

    @admin.action(permissions=["delete"], description="Delete selected sessions")
    def delete_selected(self, request, queryset):
        """Django's confirmation page, then each session deleted as the user's own is: one
        whose turn is running is refused (and said so), the others go."""
        if not request.POST.get("post"):
            return delete_selected_action(self, request, queryset)
        deleted, refused = 0, []
        for session in queryset:
            try:
                self.log_deletions(request, Session.objects.filter(pk=session.pk))
                self.delete_model(request, session)
                deleted += 1
            except Refused as refusal:
                refused.append(f"“{session}” ({refusal.message})")
        if deleted:
            self.message_user(request, f"Deleted {deleted} session(s).", messages.SUCCESS)
        if refused:
            self.message_user(request, "Not deleted: " + "; ".join(refused), messages.ERROR)
        return None

    @admin.display(description="cache hits (cached / prompt tokens)")
    def cache_hit_rate(self, session):
        usage = usage_totals(session_id=session.pk)
        ratio = usage["cache_hit_ratio"]
        if ratio is None:
            return "–"
        return f"{usage['cached_tokens']} / {usage['prompt_tokens']} ({ratio:.0%})"


class MessageInline(admin.TabularInline):
    model = Message
    fields = [
        "seq",
        "role",
        "content",
        "tool_name",
        "tool_call_id",
        "prompt_tokens",
        "cached_tokens",
        "completion_tokens",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ["seq"]


class NotesInline(admin.StackedInline):
    model = Notes
    form = checked_form(Notes, content=check_notes)
    fields = ["content", "archived", "archived_at", "updated_at"]
    readonly_fields = ["archived", "archived_at", "updated_at"]
    extra = 0


class MemoryDecisionInline(admin.TabularInline):
    model = MemoryDecision
    fields = ["created_at", "action", "actor", "user", "from_state", "to_state"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Topic)
class TopicAdmin(OrganizationScoped, admin.ModelAdmin):
    organization_path = "session__organization"
    list_display = [
        "__str__",
        "session",
        "memory_state_label",
        "is_active",
        "origin",
        "message_total",
        "created_at",
    ]
    list_filter = [
        MemoryStateFilter,
        "is_active",
        "deprecated",
        "origin",
        "session__agent",
        "session__organization",
        "session__user",
    ]
    search_fields = ["title", "summary", "messages__content"]
    form = checked_form(Topic, title=check_topic_title, summary=check_summary)
    readonly_fields = [
        "session",
        "keep_in_memory",
        "keep_in_memory_manually_set",
        "deprecated",
        "deprecated_manually_set",
        "memory_changed_at",
        "is_active",
        "origin",
        "forked_from",
        "evaluated_through_seq",
        "summarized_at",
        "summary_is_fallback",
        "summarized_through_seq",
        "summary_manually_set",
        "agent_promoted_through_seq",
        "created_at",
        "closed_at",
    ]
    inlines = [MessageInline, NotesInline, MemoryDecisionInline]
    actions = ["delete_selected"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(message_total=Count("messages"))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # No Delete link on the active topic (delete_view explains why). Not through
        # has_delete_permission: deleting its whole session must stay possible.
        topic = self.get_object(request, unquote(object_id))
        if topic is not None and topic.is_active:
            extra_context = {**(extra_context or {}), "show_delete": False}
        return super().change_view(request, object_id, form_url, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        topic = self.get_object(request, unquote(object_id))
        if topic is not None and topic.is_active:
            self.message_user(request, active_topic_refusal([topic]), messages.ERROR)
            return HttpResponseRedirect(reverse("admin:memory_topic_change", args=[topic.pk]))
        return super().delete_view(request, object_id, extra_context)

    @admin.action(permissions=["delete"], description="Delete selected topics")
    def delete_selected(self, request, queryset):
        active = list(queryset.filter(is_active=True))
        if active:
            self.message_user(request, active_topic_refusal(active), messages.ERROR)
            return None  # back to the list, nothing deleted
        return delete_selected_action(self, request, queryset)

    def save_model(self, request, obj, form, change):
        if not (change and {"title", "summary"} & set(form.changed_data)):
            super().save_model(request, obj, form, change)
            return
        # A correction: audited, the memory cache invalidated, kept by later summaries.
        do_user_edit_topic(topic=obj, user=request.user, title=obj.title, summary=obj.summary)

    def delete_model(self, request, obj):
        do_delete_topic(topic=obj, deleted_by=request.user, via=Deletion.Via.OPERATOR)

    def delete_queryset(self, request, queryset):
        for topic in queryset:  # delete_selected has refused any active topic already
            self.delete_model(request, topic)

    @admin.display(description="memory")
    def memory_state_label(self, topic):
        return topic.memory_state.label

    @admin.display(description="messages", ordering="message_total")
    def message_total(self, topic):
        return topic.message_total


def active_topic_refusal(topics) -> str:
    names = ", ".join(f"“{topic}” (session {topic.session_id})" for topic in topics)
    return f"Not deleted: {names}: {ACTIVE_TOPIC_DELETE_ERROR}"


@admin.register(Message)
class MessageAdmin(OrganizationScoped, admin.ModelAdmin):
    organization_path = "session__organization"
    list_display = [
        "seq",
        "role",
        "session",
        "topic",
        "short_content",
        "prompt_tokens",
        "cached_tokens",
        "created_at",
    ]
    list_filter = ["role", "session__agent", "session__organization", "session__user"]
    search_fields = ["content", "tool_name"]
    readonly_fields = [
        "session",
        "topic",
        "seq",
        "role",
        "tool_calls",
        "tool_call_id",
        "tool_name",
        "model_name",
        "prompt_tokens",
        "cached_tokens",
        "completion_tokens",
        "memory_trace",  # what a reply's request carried from memory, what its turn changed
        "versions",  # earlier versions (Regenerate, Edit): never in context
        "recalled",  # the recalled block kept before the message the reply answers
        "created_at",
    ]

    @admin.display(description="content")
    def short_content(self, message):
        return message.content[:80]


@admin.register(Notes)
class NotesAdmin(OrganizationScoped, admin.ModelAdmin):
    organization_path = "topic__session__organization"
    list_display = ["__str__", "archived", "updated_at"]
    list_filter = ["archived", "topic__session__agent", "topic__session__user"]
    search_fields = ["content", "topic__title"]
    form = checked_form(Notes, content=check_notes)
    readonly_fields = ["topic", "archived", "archived_at", "created_at", "updated_at"]


class FactsForm(checked_form(ImportantInfo)):
    def clean_data(self):
        """The whole document, checked as every fact is: keys (a key stored before
        today's rules may stay), values, look-alikes, count, token budget."""
        before = self.instance.data if self.instance.pk else {}
        try:
            return check_facts_document(self.cleaned_data["data"], before=before or {})
        except Refused as refused:
            raise forms.ValidationError(refused.message) from refused


class FactChangeInline(admin.TabularInline):
    """Each fact's history (read-only): who changed it, when, from which topic."""

    model = FactChange
    extra = 0
    can_delete = False
    fields = ["created_at", "key", "action", "actor", "user", "topic", "old_value", "new_value"]
    readonly_fields = fields
    verbose_name = "change"
    verbose_name_plural = f"history (the last {MAX_FACT_HISTORY} changes of each fact)"

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ImportantInfo)
class ImportantInfoAdmin(OrganizationScoped, admin.ModelAdmin):
    list_display = ["user", "agent", "organization", "updated_at"]
    list_filter = ["agent", "organization", "user"]
    search_fields = ["user__username", "agent__name"]
    readonly_fields = ["user", "agent", "organization", "updated_at", "set_by"]
    form = FactsForm
    inlines = [FactChangeInline]

    def has_add_permission(self, request):
        return False  # a document belongs to a scope: it is made by the first fact set

    def save_model(self, request, obj, form, change):
        """An operator's edit is the user's side (the agent cannot overwrite it), recorded
        key by key with the operator as who acted."""
        replace_facts(
            document=obj, data=form.cleaned_data["data"], actor=FactActor.USER, by=request.user
        )

    @admin.display(description="who set each fact")
    def set_by(self, obj):
        rows = []
        for key in sorted(obj.data or {}):
            entry = (obj.provenance or {}).get(key)
            if entry:
                rows.append((key, entry["actor"], entry["set_at"], entry.get("topic_id") or "—"))
            else:
                rows.append((key, "unknown (stored before provenance was kept)", "", ""))
        if not rows:
            return "no facts"
        return format_html(
            "<table><tr><th>key</th><th>set by</th><th>when</th><th>topic</th></tr>{}</table>",
            format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows),
        )


@admin.register(MemoryDecision)
class MemoryDecisionAdmin(AuditTrail, OrganizationScoped, admin.ModelAdmin):
    organization_path = "topic__session__organization"
    list_display = [
        "created_at",
        "action",
        "actor",
        "user",
        "topic_title",
        "from_state",
        "to_state",
    ]
    list_filter = [
        "action",
        "actor",
        "to_state",
        "topic__session__agent",
        "topic__session__organization",
    ]
    search_fields = ["topic_title", "topic__title"]


@admin.register(Deletion)
class DeletionAdmin(KeptAuditTrail, OrganizationScoped, admin.ModelAdmin):
    list_display = [
        "created_at",
        "kind",
        "via",
        "session_ref",
        "topic_ref",
        "owner",
        "agent",
        "deleted_by",
        "topics",
        "messages",
        "memory_topics",
    ]
    list_filter = ["kind", "via", "agent", "organization"]


# Staff who are not superusers are confined to their organizations (memory/admin/scope.py).
confine_auth_admin(admin.site)
