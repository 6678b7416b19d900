"""Backup and restore of the whole installation, as the README prints them: `make backup`
on one installation, `make restore FILE=...` on a fresh one (migrated, with the demo
seeded as `make run` leaves it), on SQLite and on PostgreSQL, and from SQLite to
PostgreSQL (the README's move). Every user's memory, facts, topics, messages, notes,
password, token and what search finds must come back exactly."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.test_documented_commands import ROOT, new_shell, run

SCENE = "from tests.scripts import backup_scene as scene; scene.{}()"
PG = "postgres://postgres@127.0.0.1:5432/{}"


def shell(env: dict[str, str], code: str) -> str:
    result = subprocess.run(
        [".venv/bin/python", "manage.py", "shell", "-v", "0", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def snapshot(env: dict[str, str]) -> dict:
    return json.loads(shell(env, SCENE.format("snapshot")).strip().splitlines()[-1])


def fresh(env: dict[str, str]) -> dict[str, str]:
    """A fresh clone's installation: migrated, the demo seeded (what `make run` does)."""
    for command in ("migrate --noinput", "seed_demo"):
        result = run(f".venv/bin/python manage.py {command}", env)
        assert result.returncode == 0, result.stderr
    return env


def backup(env: dict[str, str], path: Path) -> None:
    result = run(f"make backup FILE={path}", env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.is_file()


def restore(env: dict[str, str], path: Path) -> None:
    result = run(f"make restore FILE={path}", env)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def databases():
    """PostgreSQL databases made for the test, dropped after it."""
    names: list[str] = []

    def create() -> str:
        name = f"test_h44_backup_{uuid.uuid4().hex[:8]}"
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
        names.append(name)
        return name

    yield create
    for name in names:
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name])


def populated(env: dict[str, str]) -> dict:
    fresh(env)
    shell(env, SCENE.format("populate"))
    before = snapshot(env)
    assert {"alice", "bérénice", "demo"} <= set(before)
    assert before["alice"]["search"]["Grenoble"] > 0
    return before


def test_sqlite_backup_restores_on_a_fresh_sqlite_installation(tmp_path):
    source = new_shell(tmp_path / "a")
    before = populated(source)
    backup(source, tmp_path / "all.tar")
    target = fresh(new_shell(tmp_path / "b"))
    restore(target, tmp_path / "all.tar")
    assert snapshot(target) == before


@pytest.mark.postgres
def test_postgres_round_trip_and_the_move_from_sqlite(tmp_path, databases):
    sqlite = new_shell(tmp_path / "a")
    before = populated(sqlite)
    backup(sqlite, tmp_path / "from-sqlite.tar")
    # Move from SQLite to PostgreSQL.
    moved = fresh(new_shell(tmp_path / "b", DATABASE_URL=PG.format(databases())))
    restore(moved, tmp_path / "from-sqlite.tar")
    assert snapshot(moved) == before
    # A PostgreSQL installation's own round trip, onto a fresh one.
    backup(moved, tmp_path / "from-postgres.tar")
    again = fresh(new_shell(tmp_path / "c", DATABASE_URL=PG.format(databases())))
    restore(again, tmp_path / "from-postgres.tar")
    assert snapshot(again) == before
    # New rows after the restore get new ids (the sequences were moved past the data).
    shell(again, "from memory.models import Organization; Organization.objects.create(name='N')")


def test_a_file_that_is_not_a_backup_is_refused_and_nothing_changes(tmp_path):
    env = fresh(new_shell(tmp_path / "a"))
    bogus = tmp_path / "bogus.tar"
    bogus.write_text("not a backup")
    result = run(f"make restore FILE={bogus}", env)
    assert result.returncode != 0
    assert "cannot be read as a backup" in result.stdout + result.stderr
    assert "demo" in snapshot(env)
