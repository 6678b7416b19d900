"""A server process's own upkeep: what it imported at startup stays out of the cyclic
garbage collector's walks (driftless/asgi.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import gc, json
import driftless.asgi
print(json.dumps({"frozen": gc.get_freeze_count(), "walked": len(gc.get_objects())}))
"""


def test_the_startup_objects_of_a_server_process_are_frozen_out_of_full_collections():
    """A full collection walked every object Django and the apps built at import (about
    240,000: 135 ms of CPU each time, every few dozen turns); frozen, it walks only what
    came since."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["frozen"] > 100_000
    assert counts["walked"] < counts["frozen"] / 10
