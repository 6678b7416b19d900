"""Counting what a bench's turns send: SQL statements and Redis commands.

``Counted`` counts in this process (Django's connections and redis-py's, the commands of a
pipeline one by one); ``install_process_counters`` does it inside a server process and
writes the totals, every ``interval`` seconds, to a file of that process in a directory
the bench reads (``process_totals``), so a bench that drives real servers can say what a
turn cost them."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

_totals = {"sql": 0, "redis": 0}
_installed = False


def _install(*, existing: bool = True) -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from django.db.backends.signals import connection_created
    from redis.asyncio import connection as async_connection
    from redis.connection import AbstractConnection

    def sql(execute, statement, params, many, context):
        _totals["sql"] += 1
        _trace("sql", statement)
        return execute(statement, params, many, context)

    def wrap(sender, connection, **kwargs):
        if sql not in connection.execute_wrappers:
            connection.execute_wrappers.append(sql)

    connection_created.connect(wrap, weak=False)
    if existing:  # not from a settings module: Django is not configured yet
        from django.db import connections

        for connection in connections.all(initialized_only=True):
            wrap(None, connection)
    # redis.asyncio packs every command through pack_command; redis-py's own connection
    # packs a command in send_command and a pipeline's in pack_commands.
    async_connection.AbstractConnection.pack_command = _counting(
        async_connection.AbstractConnection.pack_command
    )
    AbstractConnection.send_command = _counting(AbstractConnection.send_command)
    packed = AbstractConnection.pack_commands

    def pack_commands(self, commands):
        commands = list(commands)
        _totals["redis"] += len(commands)
        for command in commands:
            _trace("redis", " ".join(str(part)[:40] for part in command[:3]))
        return packed(self, commands)

    AbstractConnection.pack_commands = pack_commands


def _trace(kind: str, text: str) -> None:
    """With ``BENCH_TRACE_FILE`` set (a path), one line a statement or command: the thread,
    the kind, its start, and the project's frames it came from: what a turn sends, and
    why (``BENCH_TRACE_FILE=/tmp/trace.tsv python -m bench.chat_load --rows cpu``)."""
    path = os.environ.get("BENCH_TRACE_FILE")
    if not path:
        return
    import traceback

    where = " < ".join(
        f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno}:{frame.name}"
        for frame in reversed(traceback.extract_stack(limit=14)[:-2])
        if "/memory/" in frame.filename or "/chat/" in frame.filename
    )[:400]
    with open(path, "a") as out:
        out.write(f"{threading.current_thread().name}\t{kind}\t{text[:160]!r}\t{where}\n")


def _counting(method):
    def counted(self, *args, **kwargs):
        _totals["redis"] += 1
        _trace("redis", " ".join(str(part)[:40] for part in args[:3]))
        return method(self, *args, **kwargs)

    return counted


def totals() -> dict[str, int]:
    """SQL statements and Redis commands this process sent since the counters were on."""
    _install()
    return dict(_totals)


class Counted:
    """``with Counted() as counted: ...``, then ``counted.sql`` and ``counted.redis``."""

    def __enter__(self) -> Counted:
        self._start = totals()
        self.sql = self.redis = 0
        return self

    def __exit__(self, *exc) -> None:
        end = totals()
        self.sql = end["sql"] - self._start["sql"]
        self.redis = end["redis"] - self._start["redis"]


def install_process_counters(directory: str, interval: float = 0.25) -> None:
    """In a server process (from its settings module): count, and keep
    ``directory/counts-<pid>.json`` up to date."""
    _install(existing=False)
    path = Path(directory, f"counts-{os.getpid()}.json")

    def dump() -> None:
        partial = path.with_suffix(".part")
        while True:  # whole files only: the bench may read at any moment
            partial.write_text(json.dumps(_totals))
            os.replace(partial, path)
            threading.Event().wait(interval)

    threading.Thread(target=dump, name="bench-counters", daemon=True).start()


def process_totals(directory: str) -> dict[str, int]:
    """The sum of every server process's totals in ``directory``."""
    found = {"sql": 0, "redis": 0}
    for path in Path(directory).glob("counts-*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for key in found:
            found[key] += int(data.get(key, 0))
    return found
