"""Keep a process running: ``python -m driftless.supervise -- <command...>``.

``make worker`` runs the Celery worker under it. Celery with a Redis broker still dies on
some broker restarts (celery#7705, kombu#970: ``Restoring N unacknowledged message(s)``
then ``Unrecoverable error: AttributeError("'NoneType' object has no attribute
'hostname'")`` when Redis goes away while the worker holds a countdown task), so the
command is started again after an unexpected exit, with a growing pause (1 s doubling to
30 s; back to 1 s once it has run for a minute). SIGTERM and SIGINT are passed on to the
command, and the supervisor exits with it. Nothing is lost meanwhile: evaluations are
due in the database and the sweep enqueues them again (memory/actions/scheduling.py).

A command that exits within ``EARLY_EXIT_SECONDS`` of starting ``GIVE_UP_AFTER`` times in
a row is not crashing on a fault that passes: it cannot start (a bad setting, a missing
module). The supervisor then stops with the command's exit code and says so, instead of
restarting it forever.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

FIRST_PAUSE_SECONDS = 1.0
MAX_PAUSE_SECONDS = 30.0
HEALTHY_AFTER_SECONDS = 60.0
EARLY_EXIT_SECONDS = 10.0
GIVE_UP_AFTER = 3


def supervise(command: list[str]) -> int:
    stopping = False
    child: subprocess.Popen | None = None

    def stop(signum, frame) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pause = FIRST_PAUSE_SECONDS
    early_exits = 0
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command)
        code = child.wait()
        if stopping:
            return code
        ran = time.monotonic() - started
        if ran > HEALTHY_AFTER_SECONDS:
            pause = FIRST_PAUSE_SECONDS
        early_exits = early_exits + 1 if ran < EARLY_EXIT_SECONDS else 0
        if early_exits >= GIVE_UP_AFTER:
            print(
                f"supervise: {command[0]} exited with {code} within {EARLY_EXIT_SECONDS:.0f} s "
                f"of starting {early_exits} times in a row: it cannot start (see its error "
                "above); not starting it again",
                file=sys.stderr,
                flush=True,
            )
            return code or 1
        print(
            f"supervise: {command[0]} exited with {code}; starting it again in {pause:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        deadline = time.monotonic() + pause
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        if stopping:
            return code
        pause = min(MAX_PAUSE_SECONDS, pause * 2)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m driftless.supervise -- <command> [args...]", file=sys.stderr)
        return 2
    return supervise(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
