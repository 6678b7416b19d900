"""One line per log event: the server's loggers print once, not once per handler."""

import os
import subprocess
import sys
from pathlib import Path

EMIT = """
import logging
for name in ["django.channels.server", "django.utils.autoreload", "django.request", "memory"]:
    logging.getLogger(name).warning("event from %s", name)
"""


def test_every_log_event_is_printed_once_in_development_mode(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE"}}
    env.update(DEBUG="true", DRIFTLESS_VAR_DIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", EMIT],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (result.stdout + result.stderr).splitlines()
    for name in ["django.channels.server", "django.utils.autoreload", "django.request", "memory"]:
        assert lines.count(f"event from {name}") == 1, lines
