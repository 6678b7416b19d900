"""The context inspector: what the agent sees on its next turn, for the session's owner."""

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from chat.api.scoping import owned_session_or_404
from memory.actions.context import inspect_context, session_memory_block
from memory.stores.consolidation import Scope
from memory.stores.memory_sources import entry_sources


@extend_schema(
    summary="The assembled context stack of a session",
    description=(
        "Each layer (stable, semi_stable, volatile) with its parts and approximate token "
        "counts, the persistent-memory entries and earlier topics their budgets dropped "
        "(``dropped``, ``dropped_earlier_topics``), the exact messages and "
        "tools a chat call would send, and the session's provider cache-hit figures. "
        "``memory_sources`` links each persistent-memory entry, kept and dropped, to its "
        "topic and to what consolidation made of it (as the memory panel does)."
    ),
    responses={200: OpenApiTypes.OBJECT, 404: OpenApiResponse(description="Not your session")},
)
@api_view(["GET"])
def session_context(request, session_id: int):
    session = owned_session_or_404(request.user, session_id)
    return Response({**inspect_context(session=session), "memory_sources": _sources(session)})


def _sources(session) -> dict:
    """The session's persistent-memory entries as links, with where each came from."""
    memory = session_memory_block(session)
    every = memory.entries + memory.dropped
    sources = entry_sources(Scope.of_session(session), every)

    def link(entry) -> dict:
        return {
            "topic_id": entry.topic_id,
            "session_id": entry.session_id,
            "title": entry.title,
            "deprecated": entry.deprecated,
            **sources[entry.topic_id].as_dict(),
        }

    return {"kept": [link(e) for e in memory.entries], "dropped": [link(e) for e in memory.dropped]}


urlpatterns = [
    path("sessions/<int:session_id>/context", session_context, name="api-session-context"),
]
