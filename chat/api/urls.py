from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from chat.api import context, evaluation, memory, portability, search, sessions, tokens

urlpatterns = [
    *sessions.urlpatterns,
    *memory.urlpatterns,
    *context.urlpatterns,
    *evaluation.urlpatterns,
    *search.urlpatterns,
    *portability.urlpatterns,
    *tokens.urlpatterns,
    path("schema/", SpectacularAPIView.as_view(), name="openapi-schema"),
]
