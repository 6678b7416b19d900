"""The local model's state, as ``make run``'s preparation writes it (driftless/local_model.py):
a JSON file in the installation's var directory that the page's badge reads, and that
:func:`memory.llm.get_chat_model` follows, so the agent switches to the local model the
moment it is ready, with no restart."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings


@dataclass(frozen=True)
class LocalEndpoint:
    base_url: str
    api_key: str
    model: str


def status_path() -> Path:
    return Path(settings.VAR_DIR) / "local-model.json"


def local_model_status() -> dict | None:
    """The preparation's last word ({"state": "preparing" | "ready" | "unavailable" |
    "stopped" | "skipped", ...}), or None when ``make run`` never prepared it here."""
    if settings.LOCAL_MODEL == "off":
        return None
    try:
        status = json.loads(status_path().read_text())
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def local_model_endpoint() -> LocalEndpoint | None:
    status = local_model_status()
    if not status or status.get("state") != "ready":
        return None
    try:
        key = Path(status["key_file"]).read_text().strip()
        return LocalEndpoint(status["base_url"], key, status["model"])
    except (KeyError, OSError, TypeError):
        return None
