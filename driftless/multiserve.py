"""Several ASGI server processes on one port: ``python -m driftless.multiserve --workers 2``
(what ``make serve`` runs; PostgreSQL and Redis are shared by the processes).

Each process is a uvicorn server with a listening socket of its own, bound to the same
port with ``SO_REUSEPORT``, so the kernel spreads new connections evenly over the
processes. uvicorn's own ``--workers`` shares one socket instead, and a websocket stays on
the process that accepted it for its whole life: measured with ``bench.chat_load``, one
of two processes held 85 % of 100 sockets, and two processes served 1.4 times the turns of
one instead of nearly twice.

The parent starts the processes, starts again one that dies, and passes SIGTERM and SIGINT
on. A process told to stop refuses new turns (socket ``server_restarting``, REST 503),
gives those in flight ``DRAIN_SECONDS`` to finish while its connections close, marks the
ones still running as interrupted (an error record the user can retry, the session's turn
lease freed) and exits, as ``driftless/serve.py`` does for ``make run``.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from types import ModuleType

import uvicorn

from driftless.drain import DRAIN_SECONDS
from memory.lib.limits import SERVER_MAX_FRAME_BYTES

logger = logging.getLogger("driftless.multiserve")

APPLICATION = "driftless.asgi:application"
BACKLOG = 2048
RESTART_PAUSE_SECONDS = 1.0  # between a process's death and its replacement
# A process that exits with an error sooner than this after its start cannot start
# (settings, imports, the database): the supervisor stops instead of starting it again and
# again. One killed by a signal is always replaced.
MIN_LIFE_SECONDS = 5.0
FLUSH_SECONDS = 0.5  # after the drain, for the last answers to leave
STOP_SECONDS = DRAIN_SECONDS + 7  # after which a process that has not exited is killed


class _Server(uvicorn.Server):
    """uvicorn, stopping as driftless/serve.py does: on the first SIGTERM or SIGINT it
    refuses new turns and stops listening, but keeps its connections open (a reply in
    flight still streams to its socket and answers its request) until the turns finish or
    ``DRAIN_SECONDS`` pass; then it marks those left as interrupted (their leases freed)
    and exits. uvicorn's own shutdown closed every websocket at once (1012) and exited with
    the turns' leases held and no record of the replies."""

    _draining = False

    def __init__(self, config: uvicorn.Config, serving: ModuleType) -> None:
        super().__init__(config)
        self.serving = serving  # memory.actions.serving, imported before any signal

    def handle_exit(self, sig: int, frame) -> None:
        # A signal handler imports nothing: it runs between two bytecodes of the main
        # thread, and a second signal can arrive while it runs (the group's SIGTERM, then
        # the supervisor's). An import in here was interrupted by the second handler's,
        # which found the module half-initialized: ImportError raised into whatever the
        # process was doing, and no drain.
        if self._draining:  # the supervisor passes on the signal the group already got
            return
        self._draining = True
        logger.info("signal %s: no new turns; finishing those in flight, then exiting", sig)
        self.serving.stop_accepting_turns()
        for server in self.servers:
            server.close()  # no new connections; the open ones stay
        threading.Thread(
            target=_drain_and_exit, args=(self.serving,), name="drain", daemon=True
        ).start()


def _drain_and_exit(serving: ModuleType) -> None:
    from django.db import connections

    code = 0
    try:
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline and serving.turns_in_flight():
            time.sleep(0.1)
        interrupted = serving.interrupt_running_turns()
        time.sleep(FLUSH_SECONDS)  # the last answers leave the socket buffers
        logger.warning(
            "process %s stopped; %d turn(s) marked interrupted", os.getpid(), interrupted
        )
        connections.close_all()
    except Exception:
        logger.exception("could not finish the turns in flight")
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # a turn thread still waiting on the model must not hold the exit


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket of this process's own on ``host:port``, sharing the port with the others."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    return sock


def serve_one(host: str, port: int, log_level: str, access_log: bool) -> None:
    """One server process, until it is told to stop."""
    make_server(log_level=log_level, access_log=access_log).run(
        sockets=[listening_socket(host, port)]
    )


def make_server(*, log_level: str, access_log: bool) -> _Server:
    """A server with its application loaded, and with it Django and what the signal
    handler calls, before it takes SIGTERM and SIGINT (uvicorn itself loads the
    application after): until then a signal ends the process, which runs no turn yet."""
    config = uvicorn.Config(
        APPLICATION,
        # uvloop where it is installed (requirements.txt): the event loop forwards every
        # event and frame of the process's sockets while the turn threads hold the GIL, and
        # asyncio's loop waits for the GIL after each of its many system calls. With uvloop
        # bench.chat_load measured two processes at 1.50 times one, against 1.42.
        loop="auto",
        ws="websockets-sansio",
        ws_max_size=SERVER_MAX_FRAME_BYTES,
        lifespan="off",
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=int(DRAIN_SECONDS),
    )
    config.load()
    from memory.actions import serving  # needs Django, set up by loading the application

    return _Server(config, serving)


class Supervisor:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.context = multiprocessing.get_context("spawn")
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.stopping = False
        self.started: dict[int, float] = {}

    def start_one(self) -> multiprocessing.process.BaseProcess:
        process = self.context.Process(
            target=serve_one,
            args=(self.args.host, self.args.port, self.args.log_level, self.args.access_log),
            name="driftless-server",
        )
        process.start()
        self.started[process.pid] = time.monotonic()
        return process

    def on_signal(self, signum: int, frame) -> None:
        self.stopping = True
        for process in self.processes:
            if process.pid and process.is_alive():
                os.kill(process.pid, signum)

    def run(self) -> int:
        # Fail here, once, if the address cannot be served (the processes would each fail).
        listening_socket(self.args.host, self.args.port).close()
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        self.processes = [self.start_one() for _ in range(self.args.workers)]
        print(
            f"driftless: {self.args.workers} server processes on "
            f"http://{self.args.host}:{self.args.port}/ (SIGTERM or Ctrl-C stops them)",
            flush=True,
        )
        status = 0
        while not self.stopping:
            time.sleep(0.5)
            for index, process in enumerate(self.processes):
                if process.is_alive() or self.stopping:
                    continue
                lived = time.monotonic() - self.started.pop(process.pid, 0.0)
                if (process.exitcode or 0) > 0 and lived < MIN_LIFE_SECONDS:
                    logger.error(
                        "server process %s could not start (exit %s)", process.pid, process.exitcode
                    )
                    self.on_signal(signal.SIGTERM, None)
                    status = 1
                    break
                logger.error(
                    "server process %s exited (%s); starting another", process.pid, process.exitcode
                )
                time.sleep(RESTART_PAUSE_SECONDS)
                self.processes[index] = self.start_one()
        deadline = time.monotonic() + STOP_SECONDS
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=2, help="server processes (1..64)")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--no-access-log", dest="access_log", action="store_false")
    args = parser.parse_args(argv)
    if not 1 <= args.workers <= 64:
        parser.error("--workers must be 1..64")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    return Supervisor(args).run()


if __name__ == "__main__":
    sys.exit(main())
