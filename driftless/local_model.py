"""``make run``'s local model, prepared in the background: ``python -m driftless.local_model``.

The site is served at once; this process (started beside it by the Makefile) builds the
local model lane once per machine (scripts/local-model.sh build: download, build, weights,
checksum, into LOCAL_MODEL_DIR, default ~/.cache/driftless/local-model), starts
llama-server with the lane's generated API key, no CORS and no /slots, and writes its
progress to ``var/local-model.json``: the page's model badge shows it, and
memory/llm/local.py switches the agent to the model once it says ``ready`` (no restart).
When the machine cannot build it (no compiler, no cmake, no network) the file says why in
one sentence and what to run, and the offline model stays. ``LOCAL_MODEL=off``, or a
configured OPENAI_BASE_URL or OPENAI_API_KEY, skips all of it; the test suite sets it off.
It stops llama-server when it is stopped, or when the server that started it is gone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "local-model.sh"
STEP_NAMES = {
    "download-source": "downloading llama.cpp",
    "build-server": "building",
    "download-weights": "downloading the weights",
    "assemble-weights": "checking the weights",
}
STEP_LINE = re.compile(r"step (\d) of 4: ([\w-]+)")
READY_SECONDS = 180


def var_dir() -> Path:
    return Path(os.environ.get("DRIFTLESS_VAR_DIR", "").strip() or ROOT / "var")


def cache_dir() -> Path:
    explicit = os.environ.get("LOCAL_MODEL_DIR", "").strip()
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(base) / "driftless" / "local-model"


def say(status: dict) -> None:
    """Write the status for the page (atomically) and a line for the terminal."""
    path = var_dir() / "local-model.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({**status, "at": time.time()}))
    partial.replace(path)
    print(f"local model: {status['message']}", file=sys.stderr, flush=True)


def skip_reason() -> str:
    if os.environ.get("LOCAL_MODEL", "").strip().lower() in {"off", "0", "false", "no"}:
        return "LOCAL_MODEL=off"
    if os.environ.get("OPENAI_BASE_URL", "").strip() or os.environ.get("OPENAI_API_KEY", ""):
        return "a model endpoint is configured (OPENAI_BASE_URL or OPENAI_API_KEY)"
    return ""


def built(cache: Path) -> bool:
    return (cache / "bin" / "llama-server").is_file() and (cache / "model.gguf.sha256").is_file()


def missing_tool() -> str:
    """Why this machine cannot build the lane, in a sentence; blank when it can."""
    if not shutil.which("cmake"):
        return "cmake is not installed"
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        return "no C++ compiler (g++ or clang++) is installed"
    return ""


def unavailable(reason: str) -> int:
    say(
        {
            "state": "unavailable",
            "message": f"The local model cannot be prepared here: {reason}. Install what "
            "is missing and run `make local-model`, or connect another model (README).",
        }
    )
    return 1


def build(cache: Path, env: dict[str, str]) -> int:
    process = subprocess.Popen(
        [str(SCRIPT), "build"], env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    step, name, tail = 0, "starting", []
    for line in process.stderr:
        sys.stderr.write(line)
        tail = (tail + [line.strip()])[-5:]
        found = STEP_LINE.search(line)
        if found:
            step, name = int(found[1]), STEP_NAMES.get(found[2], found[2])
            say(
                {
                    "state": "preparing",
                    "step": step,
                    "message": f"Preparing the local model: {name}, {step} of 4 steps",
                }
            )
    if process.wait() != 0:
        network = step in (1, 3)
        why = "the download failed (no network?)" if network else f"{name} failed"
        return unavailable(f"{why}; see {cache} and the terminal")
    return 0


def wait_ready(base_url: str, key: str, server: subprocess.Popen) -> bool:
    deadline = time.monotonic() + READY_SECONDS
    request = urllib.request.Request(
        f"{base_url}/models", headers={"Authorization": f"Bearer {key}"}
    )
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(request, timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def serve(cache: Path, env: dict[str, str], parent: int) -> int:
    host = env.get("LOCAL_MODEL_HOST", "127.0.0.1")
    port = env.get("LOCAL_MODEL_PORT", "8081")
    base_url = f"http://{host}:{port}/v1"
    say({"state": "preparing", "step": 4, "message": "Starting the local model"})
    log = open(var_dir() / "local-model-server.log", "ab")  # noqa: SIM115 (the server's life)
    server = subprocess.Popen(
        [str(SCRIPT), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
    )
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stopping.append(True))
    try:
        key = ""
        for _ in range(100):  # the script writes the key before it starts the server
            key_file = cache / "api-key"
            if key_file.is_file() and key_file.stat().st_size:
                key = key_file.read_text().strip()
                break
            time.sleep(0.1)
        if not key or not wait_ready(base_url, key, server):
            return unavailable(
                f"llama-server did not start on {host}:{port} (see "
                f"{var_dir() / 'local-model-server.log'}; LOCAL_MODEL_PORT picks another port)"
            )
        model = env.get("LOCAL_MODEL_ALIAS", "qwen2.5-coder-1.5b-instruct")
        say(
            {
                "state": "ready",
                "base_url": base_url,
                "key_file": str(cache / "api-key"),
                "model": model,
                "message": f"ready: {model} at {base_url}; the agent answers with it now",
            }
        )
        while not stopping and server.poll() is None and os.getppid() == parent:
            time.sleep(0.5)
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        say({"state": "stopped", "message": "stopped; the offline model answers"})


def main() -> int:
    parent = os.getppid()
    reason = skip_reason()
    if reason:
        say({"state": "skipped", "message": f"skipped: {reason}"})
        return 0
    cache = cache_dir()
    env = {**os.environ, "LOCAL_MODEL_DIR": str(cache), "PYTHON": sys.executable}
    if not built(cache):
        reason = missing_tool()
        if reason:
            return unavailable(reason)
        say({"state": "preparing", "step": 0, "message": "Preparing the local model"})
        if build(cache, env):
            return 1
    return serve(cache, env, parent)


if __name__ == "__main__":
    sys.exit(main())
