"""One turn in the browser, answered by the model `make run` is pointed at.

    python scripts/local-model-smoke.py [--url http://127.0.0.1:8000] [--chromium PATH]

Logs in as `make run`'s demo user in headless Chromium (Playwright), starts a conversation
with the demo agent, sends one message and waits for the reply (a CPU model may take
minutes). Prints the seconds of each step and the reply; exits 1 when the reply is the
offline model's line, a stop notice or an error. A manual check for docs/local-model.md,
not a test: nothing in CI runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from playwright.sync_api import sync_playwright

REPLY_TIMEOUT_MS = 15 * 60 * 1000
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--username", default="demo")
    parser.add_argument("--password", default="demo-password")
    parser.add_argument(
        "--message", default="Hi! In one sentence: what is a good first day in Kyoto?"
    )
    args = parser.parse_args()
    times: dict[str, float] = {}
    began = time.monotonic()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{args.url}/")
        page.wait_for_url("**/login/**")
        page.get_by_label("Username").fill(args.username)
        page.get_by_label("Password").fill(args.password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{args.url}/")
        page.locator("form[action$='/sessions/start/'] button[type=submit]").first.click()
        page.wait_for_selector("#conn[data-state=open]")
        times["page ready"] = time.monotonic() - began
        sent = time.monotonic()
        page.get_by_label("Message Drift").fill(args.message)
        page.get_by_role("button", name="Send message").click()
        page.wait_for_selector(
            ".msg-assistant .part.is-streaming, .msg-assistant .md", timeout=REPLY_TIMEOUT_MS
        )
        times["first text shown"] = time.monotonic() - sent
        page.wait_for_function(
            """() => document.querySelectorAll('.msg-assistant .part[data-message-id]').length >= 1
                  && !document.querySelector('.working')
                  && !document.querySelector('.part.is-streaming')""",
            timeout=REPLY_TIMEOUT_MS,
        )
        times["reply complete"] = time.monotonic() - sent
        reply = page.locator(".msg-assistant .md").last.inner_text()
        browser.close()
    bad = [mark for mark in ("Offline mode", "[Stopped:", "failed") if mark in reply]
    print(json.dumps({"seconds": {k: round(v, 1) for k, v in times.items()}, "reply": reply}))
    return 1 if bad or not reply.strip() else 0


if __name__ == "__main__":
    sys.exit(main())
