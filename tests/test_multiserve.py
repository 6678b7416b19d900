"""``make serve``'s processes (driftless/multiserve.py): connections spread over them, a
dead one is replaced, SIGTERM stops them all."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

from tests.live_server import ROOT, make_serve_server, running_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]

CONNECTIONS = 40
WAIT_SECONDS = 30


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def supervisor_of(port: int) -> int:
    for pid in _pids():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"driftless.multiserve" in command and str(port).encode() in command:
            return pid
    raise AssertionError(f"no driftless.multiserve process for port {port}")


def servers_of(supervisor: int, port: int) -> dict[int, set[int]]:
    """The supervisor's children that listen on ``port``, each with the inodes of the
    connections it has accepted."""
    listening, accepted = _sockets(port)
    servers = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields is None or int(fields[1]) != supervisor:
            continue
        try:
            inodes = {
                int(target[8:-1])
                for fd in os.listdir(f"/proc/{pid}/fd")
                if (target := os.readlink(f"/proc/{pid}/fd/{fd}")).startswith("socket:[")
            }
        except OSError:
            continue
        if inodes & listening:
            servers[pid] = inodes & accepted
    return servers


def _sockets(port: int) -> tuple[set[int], set[int]]:
    """Inodes of the sockets listening on ``port`` and of the connections accepted on it."""
    listening, accepted = set(), set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port != port:
            continue
        if fields[3] == "0A":  # LISTEN
            listening.add(int(fields[9]))
        elif fields[3] == "01":  # ESTABLISHED
            accepted.add(int(fields[9]))
    return listening, accepted


def wait_for(condition, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {WAIT_SECONDS} s: {what}")


def open_connections(url: str, count: int) -> list[http.client.HTTPConnection]:
    """``count`` kept-alive connections, each having had one answer."""
    parts = urlsplit(url)
    connections = []
    for _ in range(count):
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        connection.request("GET", "/login/")
        response = connection.getresponse()
        response.read()
        assert response.status == 200
        connections.append(connection)
    return connections


def test_two_processes_share_the_port_and_the_connections():
    with running_server(server=make_serve_server) as url:
        port = urlsplit(url).port
        supervisor = supervisor_of(port)
        wait_for(lambda: len(servers_of(supervisor, port)) == 2, "two processes listening")
        connections = open_connections(url, CONNECTIONS)
        try:
            held = {pid: len(inodes) for pid, inodes in servers_of(supervisor, port).items()}
        finally:
            for connection in connections:
                connection.close()
    # Each process listens on a socket of its own: the kernel spreads the connections
    # (binomial, 40 draws: fewer than 8 on one side has odds of about 1 in 100,000).
    assert sum(held.values()) == CONNECTIONS, held
    assert min(held.values()) >= 8, held


def test_a_dead_process_is_replaced_and_sigterm_stops_them_all():
    with running_server(server=make_serve_server) as url:
        port = urlsplit(url).port
        supervisor = supervisor_of(port)
        wait_for(lambda: len(servers_of(supervisor, port)) == 2, "two processes listening")
        victim = sorted(servers_of(supervisor, port))[0]
        os.kill(victim, signal.SIGKILL)
        replaced = wait_for(
            lambda: (
                servers
                if len(servers := servers_of(supervisor, port)) == 2 and victim not in servers
                else None
            ),
            "a new process in place of the killed one",
        )
        open_connections(url, 4)  # still served
        children = set(replaced)
        os.kill(supervisor, signal.SIGTERM)
        wait_for(
            lambda: all(
                _stat(pid) is None or _stat(pid)[0] == "Z" for pid in {supervisor, *children}
            ),
            "the supervisor and its processes gone after SIGTERM",
        )


# A server process whose SIGTERM handler is entered again by a second SIGTERM (the group's,
# then the supervisor's) at the worst moment: as the first one starts running a module's
# code. Signals arrive when they arrive; the tracer makes that moment certain.
SECOND_SIGNAL_MID_HANDLER = """
import signal
import sys
import time

from driftless import multiserve

server = multiserve.make_server(log_level="warning", access_log=False)
server.servers = []  # as after startup, listening on nothing

armed = True


def second_signal(frame, event, arg):
    global armed
    if armed and event == "call" and frame.f_code.co_name == "<module>":
        armed = False
        signal.raise_signal(signal.SIGTERM)


signal.signal(signal.SIGTERM, server.handle_exit)  # as uvicorn's capture_signals does
sys.settrace(second_signal)
signal.raise_signal(signal.SIGTERM)
sys.settrace(None)
signal.raise_signal(signal.SIGTERM)  # and one more after it
time.sleep(30)  # the drain thread ends the process
sys.exit(3)
"""


def test_a_second_sigterm_during_the_first_ones_handling_still_drains_and_exits_cleanly():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DRIFTLESS_DB_NAME": connection.settings_dict["NAME"],
    }
    done = subprocess.run(
        [sys.executable, "-c", SECOND_SIGNAL_MID_HANDLER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    # Exit 0 is the drain's own (driftless/multiserve.py, _drain_and_exit), after it
    # stopped accepting turns and marked none interrupted.
    assert done.returncode == 0, output
    assert "Traceback" not in output, output
