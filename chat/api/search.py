"""GET /agents-api/search?q=: the caller's own facts, topics and messages matching a query."""

from dataclasses import asdict

from django.urls import path, reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from memory.stores.search import DEFAULT_LIMIT, MAX_LIMIT, SearchHit, search_memory


def hit_url(hit: SearchHit) -> str:
    """The chat page opened at the hit's topic; "" for a fact (it is the whole answer)."""
    if hit.topic_id is None:
        return ""
    return f"{reverse('chat', args=[hit.session_id])}#topic-{hit.topic_id}"


class SearchHitSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["fact", "topic", "message"])
    title = serializers.CharField(help_text="The fact's key, or the title of the topic.")
    snippet = serializers.CharField(help_text="Plain text around the match.")
    session_id = serializers.IntegerField(allow_null=True)
    topic_id = serializers.IntegerField(allow_null=True)
    url = serializers.CharField(help_text="The chat page opened at the topic; empty for a fact.")


class SearchResultsSerializer(serializers.Serializer):
    query = serializers.CharField()
    results = SearchHitSerializer(many=True, help_text="Facts, then topics, then messages.")


@extend_schema(
    parameters=[
        OpenApiParameter("q", str, required=True, description="Words to find (all of them)."),
        OpenApiParameter("limit", int, description=f"1 to {MAX_LIMIT}; {DEFAULT_LIMIT} if absent."),
    ],
    responses={
        200: SearchResultsSerializer,
        400: OpenApiResponse(description="No word to search for, or a bad limit."),
    },
)
@api_view(["GET"])
def search(request: Request) -> Response:
    query = request.query_params.get("q", "")
    limit = request.query_params.get("limit", str(DEFAULT_LIMIT))
    if not limit.isdecimal() or not 1 <= int(limit) <= MAX_LIMIT:
        raise ValidationError({"limit": f"expected a whole number from 1 to {MAX_LIMIT}"})
    hits = search_memory(user=request.user, query=query, limit=int(limit))
    return Response(
        {"query": query, "results": [{**asdict(hit), "url": hit_url(hit)} for hit in hits]}
    )


urlpatterns = [path("search", search, name="api-search")]
