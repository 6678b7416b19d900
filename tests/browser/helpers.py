"""Helpers for the browser tests."""

from __future__ import annotations

import threading


def in_thread(fn, *args, **kwargs):
    """Run server-side work the way a worker would: off Playwright's event-loop thread
    (async_to_sync refuses to run inside a running loop), committing as it goes."""
    from django.db import connection

    outcome: dict = {}

    def run():
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as err:  # re-raised in the test
            outcome["error"] = err
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


class SlowModel:
    """An OpenAI-compatible endpoint whose streamed replies take long: one word every
    ``interval`` seconds, ``words`` of them, so a test can act while a reply streams
    (Stop, a restart). Requests without ``stream`` (summaries, drift) get ``{}``, which
    their callers set aside for their model-free fallbacks. ``cut`` is set when a client
    closed a stream before its end."""

    TEXT = (
        "A B-tree index keeps its keys in order, so PostgreSQL can find one row or a range "
        "of rows without reading the whole table. Hash indexes answer equality only; GIN "
        "indexes hold many keys per row (arrays, JSONB, full-text search); GiST and SP-GiST "
        "index geometry and ranges; BRIN keeps one summary per block range, tiny for huge "
        "tables whose order follows time."
    ).split()

    def __init__(self, *, words: int = 600, interval: float = 0.1) -> None:
        import http.server

        self.words = words
        self.interval = interval
        self.cut = threading.Event()
        self.streams = 0
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                import json

                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body.get("stream"):
                    model.streams += 1
                    model._stream(self)
                else:
                    model._complete(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def word(self, n: int) -> str:
        return self.TEXT[n % len(self.TEXT)] + " "

    def text(self, words: int | None = None) -> str:
        return "".join(self.word(n) for n in range(self.words if words is None else words))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def _chunk(delta: dict, finish: str | None = None) -> bytes:
        import json

        chunk = {
            "id": "slow",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "slow",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(chunk)}\n\n".encode()

    def _stream(self, handler) -> None:
        import time

        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        try:
            handler.wfile.write(self._chunk({"role": "assistant", "content": ""}))
            for n in range(self.words):
                handler.wfile.write(self._chunk({"content": self.word(n)}))
                handler.wfile.flush()
                time.sleep(self.interval)
            handler.wfile.write(self._chunk({}, "stop") + b"data: [DONE]\n\n")
        except OSError:  # the client closed the stream: a Stop, or a server that went away
            self.cut.set()
        handler.close_connection = True

    def _complete(self, handler) -> None:
        import json

        body = json.dumps(
            {
                "id": "slow",
                "object": "chat.completion",
                "created": 0,
                "model": "slow",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "{}"},
                        "finish_reason": "stop",
                    }
                ],
            }
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
