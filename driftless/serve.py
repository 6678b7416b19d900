"""Serve the ASGI app with daphne, and stop cleanly: ``python -m driftless.serve -b HOST
-p PORT driftless.asgi:application`` (daphne's own options).

On SIGTERM (or SIGINT) the server stops listening and refuses new turns (REST 503, socket
``server_restarting``), lets the turns in flight finish for up to ``DRAIN_SECONDS``, marks
those still running as interrupted (an error record the user can retry, and the
session's turn lease freed), and exits. Plain daphne stopped listening on SIGTERM but
never exited while a turn was in flight.

It also starts the embedded mode's periodic sweep (memory/actions/scheduling.py), which does
nothing where Celery beat sweeps.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from daphne.cli import CommandLineInterface
from daphne.http_protocol import WebRequest
from daphne.server import Server
from twisted.internet import reactor

from driftless.drain import DRAIN_SECONDS
from memory.lib.limits import SERVER_MAX_FRAME_BYTES

logger = logging.getLogger("driftless.serve")

FLUSH_SECONDS = 0.5


class GracefulServer(Server):
    def __init__(self, *args, **kwargs) -> None:
        kwargs["signal_handlers"] = False  # ours, below, instead of Twisted's
        super().__init__(*args, **kwargs)
        self._stopping = False

    def run(self) -> None:
        from memory.actions.serving import start_sweeper

        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        start_sweeper()
        super().run()

    def _on_signal(self, signum, frame) -> None:
        from memory.actions.serving import stop_accepting_turns

        if self._stopping:
            return
        self._stopping = True
        logger.info("signal %s: no new turns; finishing those in flight, then exiting", signum)
        stop_accepting_turns()
        reactor.callFromThread(self._stop_listening)
        threading.Thread(target=self._drain_and_exit, name="drain", daemon=True).start()

    def _stop_listening(self) -> None:
        for listener in self.listeners:
            listener.addCallback(lambda port: port.stopListening())

    def _answering(self) -> bool:
        """Whether an HTTP request is still being answered (a finished turn's response
        is written after its lease is released)."""
        try:
            connections = list(self.connections.items())
        except RuntimeError:  # changed by the reactor thread meanwhile: look again
            return True
        return any(
            isinstance(protocol, WebRequest)
            and details.get("application_instance") is not None
            and not details["application_instance"].done()
            for protocol, details in connections
        )

    def _drain_and_exit(self) -> None:
        from django.db import connections

        from memory.actions.serving import interrupt_running_turns, turns_in_flight

        code = 0
        try:
            deadline = time.monotonic() + DRAIN_SECONDS
            while time.monotonic() < deadline and (turns_in_flight() or self._answering()):
                time.sleep(0.1)
            interrupted = interrupt_running_turns()
            time.sleep(FLUSH_SECONDS)  # the last answers leave the socket buffers
            logger.info("stopped; %d turn(s) marked interrupted", interrupted)
            connections.close_all()
        except Exception:
            logger.exception("could not finish the turns in flight")
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # daphne's own shutdown can wait forever on busy threads


class GracefulCommandLine(CommandLineInterface):
    server_class = GracefulServer


def with_frame_limits(argv: list[str]) -> list[str]:
    """daphne's own limit is 1 MiB (a larger frame drops the connection with no close
    frame); the server takes SERVER_MAX_FRAME_BYTES unless the command line says otherwise,
    so the app answers frames up to it with ``frame_too_large`` on an open socket."""
    for flag in ("--websocket-max-message-size", "--websocket-max-frame-size"):
        if not any(arg.startswith(flag) for arg in argv):
            argv = [flag, str(SERVER_MAX_FRAME_BYTES), *argv]
    return argv


PROXY_HEADERS_REFUSED = (
    "--proxy-headers is refused: daphne takes the leftmost X-Forwarded-For entry, which the "
    "client writes, as the client's address (the login throttle counts by it). Set "
    "FORWARDED_ALLOW_IPS to the proxy's address instead (README, Production)."
)


def without_proxy_headers(argv: list[str]) -> list[str]:
    """Refuse daphne's --proxy-headers (SystemExit with the reason)."""
    if any(arg == "--proxy-headers" or arg.startswith("--proxy-headers-") for arg in argv):
        raise SystemExit(PROXY_HEADERS_REFUSED)
    return argv


def main() -> None:
    GracefulCommandLine().run(with_frame_limits(without_proxy_headers(sys.argv[1:])))


if __name__ == "__main__":
    main()
