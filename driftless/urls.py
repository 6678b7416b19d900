from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("agents-api/", include("chat.api.urls")),
    path("", include("chat.urls")),
]
