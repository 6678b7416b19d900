"""The caller's preferences of the chat page (memory/actions/preferences.py).

GET   /agents-api/preferences   {"brain_legend_seen": bool, "theme": "system"|"light"|"dark"}
PATCH /agents-api/preferences   some of them; answers them all
"""

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from memory.actions.preferences import do_set_preferences, preferences_of
from memory.models import Preferences


class PreferencesSerializer(serializers.Serializer):
    brain_legend_seen = serializers.BooleanField(
        required=False, help_text="The brain legend was dismissed (“Got it”)."
    )
    theme = serializers.ChoiceField(choices=Preferences.Theme.values, required=False)


@extend_schema(methods=["GET"], responses={200: PreferencesSerializer})
@extend_schema(
    methods=["PATCH"],
    request=PreferencesSerializer,
    responses={200: PreferencesSerializer},
    summary="Change some of your preferences of the chat page",
)
@api_view(["GET", "PATCH"])
def preferences(request: Request) -> Response:
    if request.method == "GET":
        return Response(preferences_of(request.user))
    form = PreferencesSerializer(data=request.data, partial=True)
    form.is_valid(raise_exception=True)
    return Response(do_set_preferences(user=request.user, changes=dict(form.validated_data)))


urlpatterns = [path("preferences", preferences, name="api-preferences")]
