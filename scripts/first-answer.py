"""From a fresh clone to a chat turn answered by the local model, timed (issue 44).

    .venv/bin/python scripts/first-answer.py [--venv PATH] [--port 8191] [--local-port 8091]

Clones this repository's HEAD into a temporary directory, runs `make run` there with
nothing configured (the local model is prepared in the background, in the per-machine
cache unless LOCAL_MODEL_DIR says otherwise), and times: the page served, the local
model ready, and a message typed in headless Chromium (the demo login, a new session)
answered by the local model. `--venv` links an existing virtualenv into the clone instead
of `make install` creating one. Stops everything it started; prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait(condition, timeout: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic()
        time.sleep(0.5)
    raise SystemExit(f"first-answer: {what} did not happen within {timeout:.0f} s")


def chat_turn(base: str, question: str, timeout: float) -> tuple[str, str]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", "demo")
        page.fill("input[name=password]", "demo-password")
        page.click("button[type=submit]")
        page.click("form[action$='/sessions/start/'] button")
        page.wait_for_selector("#composer-input")
        badge = page.inner_text("#model-badge")
        page.fill("#composer-input", question)
        page.press("#composer-input", "Enter")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.msg-assistant')].some("
            "n => n.innerText.trim().length > 1 && !n.querySelector('.streaming'))",
            timeout=timeout * 1000,
        )
        page.wait_for_timeout(1500)
        reply = page.locator(".msg-assistant").last.inner_text()
        browser.close()
        return badge, reply


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", help="an existing virtualenv to link as the clone's .venv")
    parser.add_argument("--port", default="8191")
    parser.add_argument("--local-port", default="8091")
    parser.add_argument("--question", default="What is the capital of France? One word.")
    args = parser.parse_args()
    clone = Path(tempfile.mkdtemp(prefix="driftless-clone-")) / "driftless"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    if args.venv:
        (clone / ".venv").symlink_to(Path(args.venv).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEBUG"))}
    env.pop("LOCAL_MODEL", None)
    env.update(PORT=args.port, LOCAL_MODEL_PORT=args.local_port)
    base = f"http://127.0.0.1:{args.port}"
    started = time.monotonic()
    log = open(clone / "make-run.log", "w")  # noqa: SIM115
    run = subprocess.Popen(
        ["make", "run"],
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    status = clone / "var" / "local-model.json"

    def ready() -> bool:
        try:
            return json.loads(status.read_text())["state"] == "ready"
        except (OSError, ValueError, KeyError):
            return False

    try:
        page = wait(lambda: answers(f"{base}/login/"), 600, "the page") - started
        model = wait(ready, 1800, "the local model ready") - started
        badge, reply = chat_turn(base, args.question, 600)
        answered = time.monotonic() - started
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
    left = subprocess.run(
        ["pgrep", "-f", f"llama-server.*--port {args.local_port}"], capture_output=True, text=True
    ).stdout.strip()
    rows = [("page served", page), ("local model ready", model), ("turn answered", answered)]
    for name, seconds in rows:
        print(f"{name:<20} {seconds:8.1f} s")
    print(f"badge: {badge!r}\nreply: {reply[:200]!r}\nllama-server left running: {bool(left)}")
    print(
        json.dumps(
            {
                "page_s": round(page, 1),
                "ready_s": round(model, 1),
                "answered_s": round(answered, 1),
                "badge": badge,
                "reply": reply[:200],
                "server_left": bool(left),
                "clone": str(clone),
            }
        )
    )
    return 0 if answered < 120 and not left and "Offline" not in reply else 1


if __name__ == "__main__":
    sys.exit(main())
