from django.contrib import admin
from django.urls import include, path

# The admin's list pages need the width at 1280 px; the breadcrumbs and the index page
# still lead everywhere the navigation sidebar did.
admin.site.enable_nav_sidebar = False

urlpatterns = [
    path("admin/", admin.site.urls),
    path("agents-api/", include("chat.api.urls")),
    path("", include("chat.urls")),
]
