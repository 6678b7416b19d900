"""The local model server is started locked (issue 45, item 9): it listened on 127.0.0.1
with CORS ``*`` and no API key, so any web page open on the machine could drive it.

``scripts/local-model.sh serve`` is run for real against a stand-in ``llama-server`` that
records the options it was given (tests never build nor start the real model).
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def serve_options(directory: Path) -> list[str]:
    recorded = directory / "options.txt"
    binary = directory / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{recorded}"\n')
    binary.chmod(0o755)
    (directory / "model.gguf").write_bytes(b"stand-in")
    env = {**os.environ, "LOCAL_MODEL_DIR": str(directory)}
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "local-model.sh"), "serve"],
        env=env,
        check=True,
        timeout=60,
    )
    return recorded.read_text().splitlines()


def option(options: list[str], name: str) -> str:
    return options[options.index(name) + 1]


def test_the_local_model_server_needs_a_generated_key_and_answers_no_page(tmp_path):
    options = serve_options(tmp_path)

    key_file = Path(option(options, "--api-key-file"))
    assert key_file == tmp_path / "api-key"
    assert len(key_file.read_text().strip()) >= 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert "--no-slots" in options
    assert option(options, "--cors-origins") == "http://no-origin.invalid"
    assert option(options, "--host") == "127.0.0.1"


def test_the_key_is_kept_from_one_start_to_the_next(tmp_path):
    serve_options(tmp_path)
    first = (tmp_path / "api-key").read_text()
    (tmp_path / "bin" / "llama-server").unlink()
    (tmp_path / "bin").rmdir()

    serve_options(tmp_path)

    assert (tmp_path / "api-key").read_text() == first
