from django.contrib.auth import views as auth_views
from django.urls import path

from chat import views
from chat.login_throttle import ThrottledAuthenticationForm

login_view = auth_views.LoginView.as_view(
    redirect_authenticated_user=True, authentication_form=ThrottledAuthenticationForm
)

urlpatterns = [
    path("", views.home, name="home"),
    path("sessions/start/", views.start_session, name="start-session"),
    path("sessions/nav/", views.session_nav, name="session-nav"),
    path("sessions/<int:session_id>/", views.chat, name="chat"),
    path("sessions/<int:session_id>/delete/", views.delete_session, name="delete-session"),
    path("search/", views.search, name="search"),
    path("data/", views.data_page, name="data"),
    path("data/export", views.data_export, name="data-export"),
    path("login/", login_view, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("favicon.ico", views.favicon, name="favicon"),
]
