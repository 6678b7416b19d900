"""A stand-in for llama-server, for scripts/first-answer.py --stand-in (never a test's real
model): ``python -m tests.scripts.stand_in_llama_server [llama-server options]`` serves the
fake OpenAI-compatible server (tests/fake_openai.py) on ``--host``/``--port``, requires the
key of ``--api-key-file``, lists ``--alias`` at /v1/models, and answers every chat with
STAND_IN_REPLY (default "Paris."), after STAND_IN_DELAY seconds, until it is stopped."""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key-file", required=True)
    parser.add_argument("--alias", default="stand-in")
    options, _ = parser.parse_known_args()  # the rest of llama-server's options
    # The fake server names the project's JSON schemas: Django first (the clone's settings).
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "driftless.settings")
    import django

    django.setup()
    from tests.fake_openai import FakeOpenAI

    reply = os.environ.get("STAND_IN_REPLY", "Paris.")
    delay = float(os.environ.get("STAND_IN_DELAY", "0"))

    def answer(body: dict) -> tuple[str, None]:
        time.sleep(delay)
        return reply, None

    server = FakeOpenAI(default_text=reply, responder=answer, port=options.port)
    server.required_key = Path(options.api_key_file).read_text().strip()
    server.served_models = [options.alias]
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    print(f"stand-in llama-server on 127.0.0.1:{options.port} as {options.alias}", flush=True)
    stop.wait()
    server.close()


if __name__ == "__main__":
    main()
