from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from chat.api import (
    context,
    evaluation,
    memory,
    model_choice,
    portability,
    preferences,
    search,
    sessions,
    tokens,
)

urlpatterns = [
    *sessions.urlpatterns,
    *memory.urlpatterns,
    *model_choice.urlpatterns,
    *context.urlpatterns,
    *evaluation.urlpatterns,
    *search.urlpatterns,
    *portability.urlpatterns,
    *tokens.urlpatterns,
    *preferences.urlpatterns,
    path("schema/", SpectacularAPIView.as_view(), name="openapi-schema"),
]
