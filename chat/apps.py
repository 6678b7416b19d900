from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from django.contrib import admin

        from chat import accounts  # noqa: F401  (connects the account receivers)
        from chat.login_throttle import ThrottledAdminAuthenticationForm

        # The admin's login counts failures like the login page's.
        admin.site.login_form = ThrottledAdminAuthenticationForm
