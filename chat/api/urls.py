from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from chat.api import context, evaluation, memory, portability, search, sessions

urlpatterns = [
    *sessions.urlpatterns,
    *memory.urlpatterns,
    *context.urlpatterns,
    *evaluation.urlpatterns,
    *search.urlpatterns,
    *portability.urlpatterns,
    path("schema/", SpectacularAPIView.as_view(), name="openapi-schema"),
]
