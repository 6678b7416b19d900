"""POST /agents-api/sessions/<id>/evaluate: schedule the evaluation pipeline, answer at once.

Fire-and-forget, as the spec's exit triggers are: the owner always gets 202, whether the
evaluation later runs, is coalesced with other triggers by the debounce, finds the
session busy or fails. Anyone else's session is a 404.
"""

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from chat.api.scoping import owned_session_or_404
from memory.actions.scheduling import request_exit_evaluation


@extend_schema(
    request=None,
    responses={
        202: inline_serializer(
            "EvaluationScheduled",
            {"session": serializers.IntegerField(), "status": serializers.CharField()},
        )
    },
)
@api_view(["POST"])
def evaluate_session(request: Request, session_id: int) -> Response:
    session = owned_session_or_404(request.user, session_id)
    request_exit_evaluation(session_id=session.pk)
    return Response({"session": session.pk, "status": "scheduled"}, status=status.HTTP_202_ACCEPTED)


urlpatterns = [
    path("sessions/<int:session_id>/evaluate", evaluate_session, name="session-evaluate"),
]
