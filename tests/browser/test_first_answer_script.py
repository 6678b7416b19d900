"""scripts/first-answer.py, run for real against the stand-in lane (issue 44): from fresh
clones of HEAD, `make run` serves the page, the badge goes through the preparation's steps
to the model with no reload, and a chat turn in Chromium is answered, with an empty cache
and then with the cache built. Nothing real is built or started (--stand-in)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import free_port

pytestmark = [pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[2]


def test_the_first_answer_script_times_both_runs_against_the_stand_in(tmp_path):
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("/usr/bin/chromium is missing")
    result = subprocess.run(
        [
            sys.executable,
            "scripts/first-answer.py",
            "--stand-in",
            "--runs",
            "empty,built",
            "--stand-in-step-seconds",
            "3",
            "--venv",
            sys.prefix,
            "--port",
            str(free_port()),
            "--local-port",
            str(free_port()),
            "--timeout",
            "300",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    empty, built = report["runs"]
    assert report["stand_in"] and report["ok"]
    assert empty["badges"][-1].startswith("Model: ") and not empty["badge_reloaded"]
    assert any("of 4 steps" in badge for badge in empty["badges"])  # the progress was shown
    assert empty["page_s"] < empty["ready_s"] <= empty["badge_s"] <= empty["answered_s"]
    assert built["answered_s"] is not None and built["reply"].startswith("Paris.")
    assert not empty["model_server_left"] and not built["model_server_left"]
