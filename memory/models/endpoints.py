"""Model endpoints the operator declares (admin): any OpenAI-compatible server, its model
names and where its key is. The key itself is never stored: ``api_key_env`` names the
environment variable that holds it (or ``api_key_file`` a file readable by the server)."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def validate_env_name(value: str) -> None:
    if value and not ENV_NAME.match(value):
        raise ValidationError(
            "The NAME of an environment variable (e.g. OPENAI_API_KEY), never the key itself."
        )


class ModelEndpoint(models.Model):
    name = models.CharField(max_length=100, unique=True, help_text="e.g. Ollama on the GPU box")
    base_url = models.URLField(
        "base URL", max_length=500, help_text="e.g. http://127.0.0.1:11434/v1 (Ollama)"
    )
    model_names = models.TextField(
        help_text="The models it serves that agents may use, one a line (the first is the default)."
    )
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        validators=[validate_env_name],
        help_text="The environment variable of the server holding the key (blank: no key).",
    )
    api_key_file = models.CharField(
        "API key file",
        max_length=500,
        blank=True,
        help_text="Or a file on the server holding the key (a secrets mount).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def models(self) -> list[str]:
        return [line.strip() for line in self.model_names.splitlines() if line.strip()]
