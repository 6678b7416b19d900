"""The REST endpoints of the memory panels: curation, the memory block, facts, notes and
consolidation (run one over a scope, list its runs, undo one).

Each view parses its input, calls one domain function and renders; every lookup goes
through the caller's own sessions and topics, so anyone else's id is a 404 and bad input
is a 400 that says what was wrong.
"""

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from django.urls import path, register_converter
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from chat.api.input import CheckedField
from chat.api.scoping import owned_session_or_404, owned_topic_or_404
from chat.api.serializers import (
    DetailSerializer,
    FactDetailSerializer,
    FactsSerializer,
    NotesSerializer,
    TopicRefSerializer,
    TopicSerializer,
)
from memory.actions.consolidation import do_consolidate, do_undo_consolidation
from memory.actions.context import session_memory_block
from memory.actions.curation import do_user_curation
from memory.actions.facts import (
    check_fact_value,
    do_set_fact,
    do_unset_fact,
    read_fact,
    read_facts_with_provenance,
)
from memory.events import topic_payload
from memory.lib.text import DEPRECATED_PREFIX
from memory.models import Agent, ConsolidationRun, FactActor, MemoryDecision, MemoryState
from memory.stores.consolidation import Scope
from memory.stores.memory_sources import (
    EntrySource,
    TopicRef,
    entry_sources,
    runs_operations,
    topic_refs,
)
from memory.stores.notes import read_latest_notes
from memory.stores.persistent import (
    PersistentMemory,
    scope_memory_entries,
    truncate_to_budget,
)
from memory.text.markdown import render_markdown

_STATES = ", ".join(MemoryState.values)
_NOT_FOUND = OpenApiResponse(DetailSerializer, description="Not one of your sessions or topics.")
_BAD_INPUT = OpenApiResponse(description="Bad input; the body names the field and the problem.")


class MemoryStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=MemoryState.choices,
        help_text="none (gray), promoted (teal) or deprecated (red).",
        error_messages={
            "invalid_choice": f"expected one of: {_STATES}; got {{input!r}}",
            "required": f"expected one of: {_STATES}",
            "null": f"expected one of: {_STATES}; got null",
        },
    )


class MemoryEntrySerializer(serializers.Serializer):
    topic_id = serializers.IntegerField()
    session_id = serializers.IntegerField()
    title = serializers.CharField()
    shown_title = serializers.CharField(
        help_text="The title as the memory block prints it: a deprecated one marked [DEPRECATED]."
    )
    summary = serializers.CharField(help_text="Empty for a deprecated entry: its title is all.")
    deprecated = serializers.BooleanField()
    tokens = serializers.IntegerField(help_text="Approximate tokens of the entry's line.")
    days = serializers.CharField(help_text="The ISO day(s) of the entry's conversation.")
    clipped = serializers.BooleanField(help_text="Its summary was cut to the entry cap.")
    decided_by = serializers.ChoiceField(
        choices=MemoryDecision.Actor.choices,
        allow_null=True,
        help_text="Who last put it in memory (or marked it no longer true); null: no record.",
    )
    decided_at = serializers.DateTimeField(allow_null=True)
    consolidation = serializers.IntegerField(
        allow_null=True, help_text="The newest applied consolidation run that changed it."
    )
    merged_from = TopicRefSerializer(
        many=True, help_text="The topics consolidation merged into it, itself included."
    )
    superseded_by = TopicRefSerializer(
        allow_null=True, help_text="For an entry consolidation deprecated: its successor."
    )


class MemoryBlockSerializer(serializers.Serializer):
    entries = MemoryEntrySerializer(many=True, help_text="Kept by the budget, oldest first.")
    deprecated = serializers.ListField(child=serializers.CharField())
    dropped = MemoryEntrySerializer(many=True, help_text="Dropped by the budget, oldest first.")
    budget = serializers.IntegerField(help_text="The agent's memory token budget.")
    used = serializers.IntegerField(help_text="Tokens of the kept entries (what the budget caps).")
    tokens = serializers.IntegerField(help_text="Tokens of the whole rendered block.")
    text = serializers.CharField(help_text="The block as the model reads it.")


class SessionMemorySerializer(MemoryBlockSerializer):
    scope = MemoryBlockSerializer(
        help_text="The block of the whole (agent, user, organization) scope, as every other "
        "session sees it: this session's topics included."
    )


class FactValueSerializer(serializers.Serializer):
    value = CheckedField(
        check_fact_value,
        schema={},
        help_text="Any JSON value: text, number, boolean, list, object (docs/limits.md).",
    )


@extend_schema(
    request=MemoryStateSerializer,
    responses={200: TopicSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND},
    summary="Set a topic's memory state (the brain icon), as the user",
)
@api_view(["PUT", "PATCH"])
def topic_memory(request: Request, topic_id: int) -> Response:
    """The user's choice sticks against the agent and the summarizer (the manual flags);
    the answer is the topic as it now is. A topic without a summary is summarized first
    (it enters memory titled); a topic without messages cannot enter memory (400)."""
    topic = owned_topic_or_404(request.user, topic_id)
    form = MemoryStateSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    do_user_curation(
        topic=topic, state=MemoryState(form.validated_data["state"]), user=request.user
    )
    topic.refresh_from_db()
    return Response(topic_payload(topic))


@extend_schema(
    responses={200: SessionMemorySerializer, 404: _NOT_FOUND},
    summary="The persistent-memory block of a session",
)
@api_view(["GET"])
def session_memory(request: Request, session_id: int) -> Response:
    """The persistent-memory block as this session sees it (its own topics left out, as
    they reach it as earlier topics), and under ``scope`` the block every other session of
    the (agent, user, organization) scope carries, this session's topics included."""
    session = owned_session_or_404(request.user, session_id)
    entries = scope_memory_entries(session=session)
    scope = truncate_to_budget(entries, budget=session.agent.memory_token_budget)
    sources = entry_sources(Scope.of_session(session), entries)
    own = session_memory_block(session)
    return Response({**_block(own, sources), "scope": _block(scope, sources)})


@extend_schema(responses={200: FactsSerializer, 404: _NOT_FOUND}, summary="Durable facts")
@api_view(["GET"])
def session_facts(request: Request, session_id: int) -> Response:
    """The scope's facts and, per key, who last set it (user, agent, import,
    consolidator), when and from which topic."""
    session = owned_session_or_404(request.user, session_id)
    return Response(_facts(session))


@extend_schema(
    methods=["GET"],
    operation_id="sessions_fact_history_retrieve",
    responses={200: FactDetailSerializer, 404: _NOT_FOUND},
    summary="One durable fact with its history",
)
@extend_schema(
    methods=["PUT"],
    request=FactValueSerializer,
    responses={200: FactsSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND},
    summary="Create or change one durable fact, as the user",
)
@extend_schema(
    methods=["DELETE"],
    responses={204: None, 400: _BAD_INPUT, 404: _NOT_FOUND},
    summary="Delete one durable fact, as the user",
)
@api_view(["GET", "PUT", "DELETE"])
def session_fact(request: Request, session_id: int, key: str) -> Response:
    """Read (with its history: the newest changes first, who, when, the values before and
    after), create, change or remove one durable fact of the session's scope. Changes are
    the user's: the agent cannot overwrite or remove them. A key is one line of visible
    characters, normalized, and may not look like another key (docs/limits.md)."""
    session = owned_session_or_404(request.user, session_id)
    if request.method == "GET":
        return _fact_detail(session, key)
    if request.method == "DELETE":
        if not do_unset_fact(session=session, key=key, actor=FactActor.USER, by=request.user):
            return Response(
                {"detail": f"there is no fact named {key!r}"}, status=status.HTTP_404_NOT_FOUND
            )
        return Response(status=status.HTTP_204_NO_CONTENT)
    form = FactValueSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    # A refused key or value is a 400 naming the field (chat/api/errors.py).
    do_set_fact(
        session=session,
        key=key,
        value=form.validated_data["value"],
        actor=FactActor.USER,
        by=request.user,
    )
    return Response(_facts(session))


def _facts(session) -> dict:
    facts, provenance = read_facts_with_provenance(user=session.user, agent=session.agent)
    return {"facts": facts, "provenance": _with_topics(session, provenance)}


def _fact_detail(session, key: str) -> Response:
    fact = read_fact(user=session.user, agent=session.agent, key=key)
    if not fact["found"] and not fact["history"]:
        return Response(
            {"detail": f"there is no fact named {key!r}"}, status=status.HTTP_404_NOT_FOUND
        )
    (provenance,) = _with_topics(session, {key: fact["provenance"]}).values()
    return Response({**fact, "provenance": provenance})


def _with_topics(session, provenance: dict[str, dict | None]) -> dict[str, dict | None]:
    """Each fact's topic as a link (``topic``), when it is a topic of the scope still."""
    ids = {p["topic_id"] for p in provenance.values() if p and p.get("topic_id") is not None}
    refs = topic_refs(Scope.of_session(session), ids)
    return {
        key: None if p is None else {**p, "topic": _ref_dict(refs.get(p.get("topic_id")))}
        for key, p in provenance.items()
    }


def _ref_dict(ref: TopicRef | None) -> dict | None:
    return None if ref is None else asdict(ref)


@extend_schema(responses={200: NotesSerializer, 404: _NOT_FOUND}, summary="A topic's notes")
@api_view(["GET"])
def topic_notes(request: Request, topic_id: int) -> Response:
    """The topic's notes: the active document, or for a closed topic its archived one."""
    topic = owned_topic_or_404(request.user, topic_id)
    content, archived = read_latest_notes(topic=topic)
    return Response(
        {
            "topic_id": topic.pk,
            "content": content,
            "content_html": render_markdown(content),
            "archived": archived,
        }
    )


def _entry(entry, sources: dict[int, EntrySource]) -> dict:
    prefix = DEPRECATED_PREFIX if entry.deprecated else ""
    source = sources.get(entry.topic_id) or EntrySource()
    return {**asdict(entry), "shown_title": prefix + entry.title, **source.as_dict()}


def _block(memory: PersistentMemory, sources: dict[int, EntrySource]) -> dict:
    return {
        "entries": [_entry(entry, sources) for entry in memory.entries],
        "deprecated": [entry.title for entry in memory.entries if entry.deprecated],
        "dropped": [_entry(entry, sources) for entry in memory.dropped],
        "budget": memory.budget,
        # What the budget counts (the entry lines), and the whole rendered block.
        "used": sum(entry.tokens for entry in memory.entries),
        "tokens": memory.tokens,
        "text": memory.text,
    }


# --- consolidation -------------------------------------------------------------------------

_AGENT = OpenApiParameter("agent", int, required=True, description="One of your agents.")
RUNS_LISTED = 50


class ConsolidationOperationSerializer(serializers.Serializer):
    op = serializers.ChoiceField(choices=["merge", "supersede"])
    applied = serializers.BooleanField(help_text="false: refused (``reason`` says why).")
    reason = serializers.CharField()
    into = TopicRefSerializer(
        required=False, allow_null=True, help_text="merge: the entry the others became."
    )
    sources = TopicRefSerializer(many=True, required=False, help_text="merge: merged away.")
    old = TopicRefSerializer(required=False, help_text="supersede: the reversed entry.")
    new = TopicRefSerializer(required=False, help_text="supersede: its successor.")


class ConsolidationRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    agent = serializers.IntegerField()
    status = serializers.ChoiceField(choices=ConsolidationRun.Status.choices)
    status_text = serializers.CharField(help_text="The status in words, as the panel says it.")
    trigger = serializers.ChoiceField(choices=ConsolidationRun.Trigger.choices)
    trigger_text = serializers.CharField(help_text="Who or what started it, in words.")
    detail = serializers.CharField(help_text="Why nothing changed, when nothing did.")
    model = serializers.CharField()
    entries_sent = serializers.IntegerField(help_text="Promoted entries the model was shown.")
    proposal = serializers.ListField(help_text="The operations as the model proposed them.")
    applied = serializers.ListField(help_text="Applied operations, with before and after.")
    refused = serializers.ListField(help_text="Refused operations, each with its reason.")
    block_before = serializers.CharField(help_text="The scope's memory block before the run.")
    block_after = serializers.CharField(help_text="The block after it (empty: nothing applied).")
    operations = ConsolidationOperationSerializer(
        many=True, help_text="What it applied, then what it refused, with the topics as links."
    )
    undoable = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    undone_at = serializers.DateTimeField(allow_null=True)


def _agent(request: Request) -> Agent:
    agent_id = request.query_params.get("agent", "")
    if not agent_id.isdecimal():
        raise ValidationError({"agent": ["expected the id of one of your agents"]})
    return get_object_or_404(Agent.objects.usable_by(request.user), pk=int(agent_id))


def _run(run: ConsolidationRun, operations: list[dict] | None = None) -> dict:
    if operations is None:
        operations = runs_operations([run])[run.pk]
    return {
        "id": run.pk,
        "agent": run.agent_id,
        "status": run.status,
        "status_text": run.get_status_display(),
        "trigger": run.trigger,
        "trigger_text": run.get_trigger_display(),
        "detail": run.detail,
        "model": run.model_name,
        "entries_sent": run.entries_sent,
        "proposal": run.proposal,
        "applied": run.applied,
        "refused": run.refused,
        "block_before": run.block_before,
        "block_after": run.block_after,
        "operations": operations,
        "undoable": run.undoable,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "undone_at": run.undone_at,
    }


def _owned_run_or_404(request: Request, run_id: int) -> ConsolidationRun:
    return get_object_or_404(ConsolidationRun.objects.owned_by(request.user), pk=run_id)


@extend_schema(
    request=None,
    parameters=[_AGENT],
    responses={200: ConsolidationRunSerializer, 400: _BAD_INPUT, 404: _NOT_FOUND},
    summary="Consolidate the memory of one of your agents (merge, supersede)",
)
@api_view(["POST"])
def consolidate(request: Request) -> Response:
    """Run one consolidation of your memory with this agent, now, and answer the run: what
    the model proposed, what was applied (with before and after), what was refused (an
    entry you curated is never changed) and the memory block before and after. An
    unusable answer changes nothing (``status`` unusable or failed, ``detail`` says why)."""
    agent = _agent(request)
    run = do_consolidate(agent=agent, user=request.user, requested_by=request.user)
    return Response(_run(run))


@extend_schema(
    parameters=[_AGENT],
    responses={200: ConsolidationRunSerializer(many=True), 400: _BAD_INPUT, 404: _NOT_FOUND},
    summary="Consolidation runs of your memory with one agent, newest first",
)
@api_view(["GET"])
def consolidation_runs(request: Request) -> Response:
    agent = _agent(request)
    runs = list(ConsolidationRun.objects.owned_by(request.user).filter(agent=agent)[:RUNS_LISTED])
    operations = runs_operations(runs)
    return Response([_run(run, operations[run.pk]) for run in runs])


@extend_schema(
    responses={200: ConsolidationRunSerializer, 404: _NOT_FOUND},
    summary="One consolidation run",
)
@api_view(["GET"])
def consolidation_run(request: Request, run_id: int) -> Response:
    return Response(_run(_owned_run_or_404(request, run_id)))


@extend_schema(
    request=None,
    responses={200: ConsolidationRunSerializer, 404: _NOT_FOUND, 409: DetailSerializer},
    summary="Undo a consolidation run",
)
@api_view(["POST"])
def undo_consolidation(request: Request, run_id: int) -> Response:
    """Put every entry the run changed back as it was: the memory block is the one before
    the run, to the byte. 409 when the run was not applied, is already undone, or an entry
    it changed has changed since (undoing would overwrite that later choice)."""
    run = do_undo_consolidation(run=_owned_run_or_404(request, run_id), user=request.user)
    return Response(_run(run))


class FactKeyConverter:
    """Any text, line breaks too: a key the rules refuse is answered with a JSON 400 that
    says why, and one stored before them can still be removed."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(FactKeyConverter, "factkey")

urlpatterns = [
    path("topics/<int:topic_id>/memory", topic_memory, name="api-topic-memory"),
    path("topics/<int:topic_id>/notes", topic_notes, name="api-topic-notes"),
    path("sessions/<int:session_id>/memory", session_memory, name="api-session-memory"),
    path("sessions/<int:session_id>/facts", session_facts, name="api-session-facts"),
    path("sessions/<int:session_id>/facts/<factkey:key>", session_fact, name="api-session-fact"),
    path("memory/consolidate", consolidate, name="api-memory-consolidate"),
    path("memory/consolidations", consolidation_runs, name="api-memory-consolidations"),
    path("memory/consolidations/<int:run_id>", consolidation_run, name="api-memory-consolidation"),
    path(
        "memory/consolidations/<int:run_id>/undo",
        undo_consolidation,
        name="api-memory-consolidation-undo",
    ),
]
