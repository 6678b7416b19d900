"""A user's own settings of the chat page, kept on the server so they follow the user from
browser to browser: the brain legend's "Got it", the colour theme."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Preferences(models.Model):
    class Theme(models.TextChoices):
        SYSTEM = "system", "As the system"
        LIGHT = "light", "Light"
        DARK = "dark", "Dark"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="driftless_preferences"
    )
    brain_legend_seen = models.BooleanField(
        default=False, help_text="The user dismissed the brain legend (“Got it”)."
    )
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "preferences"

    def __str__(self) -> str:
        return f"preferences of user {self.user_id}"
