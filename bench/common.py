"""What several benches share: Django on the embedded default (SQLite and in-process
layers, no model) in a directory of the bench's own, and whether a local service answers."""

from __future__ import annotations

import os
import socket
import tempfile


def embedded_django(prefix: str) -> str:
    """Set Django up on a fresh embedded database, migrated; returns its directory."""
    var_dir = tempfile.mkdtemp(prefix=prefix)
    os.environ.update(
        {
            "SECRET_KEY": "bench-only-secret-key",
            "DEBUG": "false",
            "DJANGO_SETTINGS_MODULE": "driftless.settings",
            "DRIFTLESS_VAR_DIR": var_dir,
        }
    )
    for name in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return var_dir


def reachable(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (PostgreSQL, Redis)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
