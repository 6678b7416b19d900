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


def test_servers_started_at_once_share_one_key(tmp_path):
    """Two servers started together (one per port, as the benches run them) once each wrote
    its own key over the other's, so the first refused every request with the key left."""
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    # The stand-in reads the key as the real server does, when it starts.
    binary.write_text(f'#!/bin/sh\ncat "{tmp_path}/api-key" > "{tmp_path}/seen.$$"\n')
    binary.chmod(0o755)
    (tmp_path / "model.gguf").write_bytes(b"stand-in")
    env = {**os.environ, "LOCAL_MODEL_DIR": str(tmp_path)}
    starts = [
        subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "local-model.sh"), "serve"],
            env={**env, "LOCAL_MODEL_PORT": str(18500 + number)},
        )
        for number in range(4)
    ]
    assert [start.wait(timeout=60) for start in starts] == [0, 0, 0, 0]

    key = (tmp_path / "api-key").read_text()
    seen = [path.read_text() for path in tmp_path.glob("seen.*")]
    assert len(seen) == 4 and set(seen) == {key}
    assert sorted(path.name for path in tmp_path.iterdir() if "api-key" in path.name) == ["api-key"]
