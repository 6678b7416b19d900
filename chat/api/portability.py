"""Memory export and import: one JSON document per scope (docs/memory-export.md).

GET  /agents-api/memory/export?agent=<id>[&sessions=true]
POST /agents-api/memory/import?agent=<id>   (the document as the JSON body)

The scope is the caller, the agent and the agent's organization; an agent the caller
cannot use is a 404. An import that is malformed or too large is a 400 naming the field,
and changes nothing.
"""

from dataclasses import asdict

from django.conf import settings
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes, throttle_classes
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.utils import json

from memory.actions.export_text import export_text
from memory.actions.portability import (
    IMPORT_JSON_DEPTH,
    check_memory_document,
    export_memory,
    import_memory,
)
from memory.lib.errors import InvalidInput
from memory.lib.validation import check_json_depth
from memory.models import Agent

_AGENT = OpenApiParameter("agent", int, required=True, description="One of your agents.")
_NOT_FOUND = OpenApiResponse(description="Not one of your agents.")


class ImportReportSerializer(serializers.Serializer):
    facts = serializers.IntegerField(help_text="Facts in the document (merged by key).")
    facts_added = serializers.ListField(child=serializers.CharField(), help_text="Keys new here.")
    facts_changed = serializers.ListField(
        child=serializers.CharField(),
        help_text="Keys the document changed: it was exported after their last setting.",
    )
    facts_skipped = serializers.ListField(
        child=serializers.CharField(),
        help_text="Keys left as they are: set here after the document was exported.",
    )
    sessions_created = serializers.IntegerField()
    topics_created = serializers.IntegerField()
    topics_updated = serializers.IntegerField()
    messages_created = serializers.IntegerField()


def _agent(request: Request) -> Agent:
    agent_id = request.query_params.get("agent", "")
    if not agent_id.isdecimal():
        raise ValidationError({"agent": "expected the id of one of your agents"})
    return get_object_or_404(Agent.objects.usable_by(request.user), pk=int(agent_id))


class ExportRateThrottle(UserRateThrottle):
    """Exports per user (settings ``EXPORT_THROTTLE``): each reads a whole history."""

    scope = "export"

    def get_rate(self) -> str:  # read when asked, so a changed setting holds at once
        return settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["export"]


def export_throttled(request) -> bool:
    """Whether this export is one too many (the REST export and the page's download)."""
    return not ExportRateThrottle().allow_request(request, None)


@extend_schema(
    parameters=[
        _AGENT,
        OpenApiParameter("sessions", bool, description="Include every session whole."),
    ],
    responses={
        200: OpenApiTypes.OBJECT,
        400: OpenApiResponse(description="Bad agent."),
        404: _NOT_FOUND,
    },
)
@api_view(["GET"])
@throttle_classes([ExportRateThrottle, UserRateThrottle])
def export_view(request: Request) -> Response:
    include = request.query_params.get("sessions", "false")
    if include not in ("true", "false"):
        raise ValidationError({"sessions": "expected true or false"})
    agent = _agent(request)
    if include == "true":  # a whole history: streamed, a few sessions at a time
        response = StreamingHttpResponse(
            export_text(user=request.user, agent=agent, include_sessions=True),
            content_type="application/json",
        )
    else:
        response = Response(export_memory(user=request.user, agent=agent))
    response["Content-Disposition"] = f'attachment; filename="driftless-memory-{agent.pk}.json"'
    return response


class LimitedJSONParser(BaseParser):
    """A JSON body of at most MEMORY_IMPORT_MAX_BYTES, nested at most IMPORT_JSON_DEPTH.

    Not a JSONParser: DRF reads those through ``request.body``, which Django caps at
    DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB) with an HTML page; this one reads the stream
    itself, up to the documented limit, and refuses past it in JSON."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        request = parser_context["request"]
        limit = settings.MEMORY_IMPORT_MAX_BYTES
        too_large = ParseError(f"the document is larger than {limit} bytes")
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise too_large
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise too_large
        try:
            text = body.decode((parser_context or {}).get("encoding") or "utf-8")
            check_json_depth(text, field="document", limit=IMPORT_JSON_DEPTH)
            return json.loads(text, parse_constant=json.strict_constant)
        except InvalidInput as err:
            raise ParseError(f"JSON parse error - {err.message}") from err
        except (LookupError, ValueError, RecursionError) as err:
            raise ParseError(f"JSON parse error - {err}") from err


@extend_schema(
    parameters=[_AGENT],
    request=OpenApiTypes.OBJECT,
    responses={
        200: ImportReportSerializer,
        400: OpenApiResponse(description="Malformed or too large; nothing was changed."),
        404: _NOT_FOUND,
    },
)
@api_view(["POST"])
@parser_classes([LimitedJSONParser])
def import_view(request: Request) -> Response:
    """``?check=1``: only check the document (the page's preview), refused as the import
    would refuse it; nothing is changed."""
    agent = _agent(request)
    if request.query_params.get("check") == "1":
        check_memory_document(request.data)
        return Response({"ok": True}, status=status.HTTP_200_OK)
    report = import_memory(user=request.user, agent=agent, document=request.data)
    return Response(asdict(report), status=status.HTTP_200_OK)


urlpatterns = [
    path("memory/export", export_view, name="api-memory-export"),
    path("memory/import", import_view, name="api-memory-import"),
]
