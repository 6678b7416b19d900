"""make run's local model lane (driftless/local_model.py), without building or starting
anything: what it says when skipped or when the machine cannot build, what the page
shows, and the agent switching to the model once the lane says it is ready."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rest_framework.test import APIClient

from memory.llm import get_chat_model

ROOT = Path(__file__).resolve().parent.parent


def lane(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LOCAL_MODEL"))}
    base.update(DRIFTLESS_VAR_DIR=str(tmp_path), LOCAL_MODEL_DIR=str(tmp_path / "cache"), **env)
    result = subprocess.run(
        [sys.executable, "-m", "driftless.local_model"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, json.loads((tmp_path / "local-model.json").read_text())


def test_local_model_off_and_a_configured_endpoint_skip_it(tmp_path):
    result, status = lane(tmp_path, LOCAL_MODEL="off")
    assert result.returncode == 0 and status["state"] == "skipped"
    assert "LOCAL_MODEL=off" in status["message"]
    result, status = lane(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:11434/v1")
    assert status["state"] == "skipped" and "OPENAI_BASE_URL" in status["message"]
    assert not (tmp_path / "cache").exists()


def test_a_machine_without_cmake_is_told_why_and_what_to_run(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    result, status = lane(tmp_path, PATH=str(bare))
    assert result.returncode == 1 and status["state"] == "unavailable"
    assert "cmake is not installed" in status["message"]
    assert "make local-model" in status["message"]
    assert "cmake is not installed" in result.stderr  # the terminal says it too


def test_the_page_shows_the_lanes_progress_then_the_model_once_ready(
    alice, session, settings, tmp_path, fake_openai
):
    settings.VAR_DIR = tmp_path
    settings.LOCAL_MODEL = "auto"
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = ""
    status = tmp_path / "local-model.json"
    status.write_text(
        json.dumps(
            {
                "state": "preparing",
                "step": 2,
                "message": "Preparing the local model: building, 2 of 4 steps",
            }
        )
    )
    page = APIClient()
    page.force_login(alice)
    html = page.get(f"/sessions/{session.pk}/").content.decode()
    assert "Preparing the local model: building, 2 of 4 steps" in html
    assert get_chat_model("chat", agent=session.agent).offline

    (tmp_path / "key").write_text("lane-key\n")
    status.write_text(
        json.dumps(
            {
                "state": "ready",
                "base_url": fake_openai.base_url,
                "key_file": str(tmp_path / "key"),
                "model": "qwen2.5-coder-1.5b-instruct",
                "message": "ready",
            }
        )
    )
    api = APIClient()
    api.force_authenticate(alice)
    body = api.post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": "Hi"}, format="json"
    ).json()
    assert body["reply"]["content"] == fake_openai.default_text
    assert fake_openai.requests[-1]["model"] == "qwen2.5-coder-1.5b-instruct"
    assert fake_openai.headers[-1]["authorization"] == "Bearer lane-key"
    assert (
        "Model: qwen2.5-coder-1.5b-instruct"
        in page.get(f"/sessions/{session.pk}/").content.decode()
    )

    settings.LOCAL_MODEL = "off"  # what tests and CI run with: never followed
    assert get_chat_model("chat", agent=session.agent).offline
