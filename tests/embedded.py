"""A test file run again on the embedded default, for features whose SQL differs by engine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def rerun_on_the_embedded_default(test_file: str) -> subprocess.CompletedProcess:
    """``test_file`` again, in a pytest process on the embedded default (SQLite, FTS5);
    asserts it passed."""
    env = {**os.environ, "DRIFTLESS_TEST_EMBEDDED": "1", "CI": ""}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
    return run
