"""Model endpoints the operator declares (admin): any OpenAI-compatible server, its model
names and where its key is. The key itself is never stored: ``api_key_env`` names the
environment variable that holds it (or ``api_key_file`` a file readable by the server).

``user_model_names`` are the models of the endpoint users may pick for a session of theirs
(the chat page's picker; memory/actions/sessions.py): only those, and only while the
operator leaves them there."""

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


class ModelEndpointQuerySet(models.QuerySet):
    def pickable(self) -> ModelEndpointQuerySet:
        """Endpoints with a model users may pick."""
        return self.exclude(user_model_names="")


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
    user_model_names = models.TextField(
        "models users may pick",
        blank=True,
        help_text="Of the models above, those users may pick for a session of theirs on the "
        "chat page, one a line (blank: none; the agent's own model is always a choice).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ModelEndpointQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def models(self) -> list[str]:
        return _lines(self.model_names)

    @property
    def user_models(self) -> list[str]:
        """The models users may pick: those of ``user_model_names`` the endpoint serves."""
        served = set(self.models)
        return [name for name in _lines(self.user_model_names) if name in served]

    def clean(self) -> None:
        unknown = [name for name in _lines(self.user_model_names) if name not in self.models]
        if unknown:
            raise ValidationError(
                {
                    "user_model_names": "Not among its models above: "
                    + ", ".join(unknown)
                    + ". Users may pick only models the endpoint serves."
                }
            )


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]
