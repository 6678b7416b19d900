"""The model a session answers with, as its chat page's badge shows it, and the user's pick.

GET /agents-api/sessions/<id>/model   the model, the local model's progress while ``make
                                      run`` prepares it, the models the user may pick, and
                                      the badge's HTML (templates/chat/_model_badge.html)
PUT /agents-api/sessions/<id>/model   {"choice": "<id of one of choices>"}: the session's
                                      next turn answers with it; answers as GET

The page asks GET again while the local model is being prepared, and puts the badge's HTML
in place (static/js/model-badge.js): the progress, then the model, with no reload. Only the
session's owner reaches either (another user's session is a 404); a model the operator
does not let users pick is refused (400 ``model_not_allowed``) and the session keeps its.
"""

from __future__ import annotations

from django.template.loader import render_to_string
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from chat.api.scoping import owned_session_or_404
from chat.api.serializers import DetailSerializer
from chat.page_config import model_shown
from memory.actions.sessions import do_choose_session_model


class ModelChoiceSerializer(serializers.Serializer):
    id = serializers.CharField(help_text='"" is the agent\'s own model.')
    label = serializers.CharField()


class SessionModelSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The model that answers the next turn.")
    offline = serializers.BooleanField(help_text="The offline stand-in answers.")
    state = serializers.CharField(
        help_text='The local model\'s preparation when it matters: "preparing" (the page asks '
        'again), "unavailable", or "".'
    )
    local = serializers.CharField(help_text="Its progress, or why it cannot be prepared.")
    profile = serializers.CharField(help_text="small or capable (docs/memory.md).")
    choices = ModelChoiceSerializer(many=True)
    choice = serializers.CharField(help_text="The session's pick (one of choices' ids).")
    badge = serializers.CharField(help_text="The badge's HTML, as the chat page shows it.")


class ChooseModelSerializer(serializers.Serializer):
    choice = serializers.CharField(
        allow_blank=True, max_length=300, help_text="One of choices' ids (\"\": the agent's)."
    )


_FIELDS = ("name", "offline", "state", "local", "profile", "choices", "choice")


def _shown(request: Request, session) -> dict:
    model = model_shown(session)
    badge = render_to_string(
        "chat/_model_badge.html",
        {"model": model, "agent_name": session.agent.name},
        request=request._request,
    )
    return {**{key: model[key] for key in _FIELDS}, "badge": badge}


@extend_schema(
    methods=["GET"],
    responses={200: SessionModelSerializer, 404: DetailSerializer},
    summary="The model a session answers with, and the models you may pick",
)
@extend_schema(
    methods=["PUT"],
    request=ChooseModelSerializer,
    responses={
        200: SessionModelSerializer,
        400: OpenApiResponse(DetailSerializer, description="Not a model you may pick."),
        404: DetailSerializer,
    },
    summary="Pick the model of a session (one the operator lets users pick)",
)
@api_view(["GET", "PUT"])
def session_model(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    if request.method == "PUT":
        form = ChooseModelSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        do_choose_session_model(session=session, choice=form.validated_data["choice"])
    return Response(_shown(request, session))


urlpatterns = [
    path("sessions/<int:session_id>/model", session_model, name="api-session-model"),
]
