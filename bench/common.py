"""What several benches share: the one way a bench sets Django up (:func:`setup_django`),
Django on the embedded default (SQLite and in-process layers, no model) in a directory of
the bench's own, and whether a local service answers."""

from __future__ import annotations

import os
import socket
import tempfile


def setup_django(*, migrate: bool = False) -> None:
    """Set Django up, once per process, from the environment the bench has set (its
    ``DJANGO_SETTINGS_MODULE``, database and cache URLs); ``migrate`` then migrates its
    database. Every bench calls this rather than ``django.setup()``, and before it imports
    anything that needs the models (tests/fake_openai.py included)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "driftless.settings")
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


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
    setup_django(migrate=True)
    return var_dir


def reachable(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (PostgreSQL, Redis)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
