"""The commands the README prints work as printed, in the environment it sets up: a shell
with nothing exported (no DEBUG, no SECRET_KEY), in the project directory, on the
embedded default (here a temporary var directory)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.faults import RedisServer, Spawned, wait_for

ROOT = Path(__file__).resolve().parent.parent
# What a test run exports and a newcomer's shell does not.
NOT_IN_A_NEW_SHELL = {
    "DEBUG",
    "SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "DJANGO_SETTINGS_MODULE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DRIFTLESS_MODEL",
}


def new_shell(var_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NOT_IN_A_NEW_SHELL}
    env.update(DRIFTLESS_VAR_DIR=str(var_dir), LOCAL_MODEL="off", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def run(command: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``command`` through the shell, as a user types it."""
    return subprocess.run(
        command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installation(tmp_path_factory) -> dict[str, str]:
    """A migrated embedded installation with the demo seeded, nothing exported."""
    env = new_shell(tmp_path_factory.mktemp("var"))
    result = run(".venv/bin/python manage.py migrate --noinput", env)
    assert result.returncode == 0, result.stderr
    return env


def test_seed_demo_reset_password_works_as_the_banner_prints_it(installation):
    result = run(".venv/bin/python manage.py seed_demo --reset-password", installation)
    assert result.returncode == 0, result.stderr
    assert "Password  demo-password" in result.stdout
    assert "SECRET_KEY" not in result.stderr
    key = Path(installation["DRIFTLESS_VAR_DIR"]) / "secret_key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert len(key.read_text().strip()) >= 50


def test_export_import_and_consolidate_work_without_debug(installation, tmp_path):
    run(".venv/bin/python manage.py seed_demo", installation)
    agent = run(
        ".venv/bin/python manage.py shell -c "
        "\"from memory.models import Agent; print(Agent.objects.get(name='Drift').pk)\"",
        installation,
    )
    assert agent.returncode == 0, agent.stderr
    agent_id = agent.stdout.split()[-1]
    exported = tmp_path / "memory.json"
    result = run(
        f".venv/bin/python manage.py export_memory --username demo --agent {agent_id} "
        f"--sessions --output {exported}",
        installation,
    )
    assert result.returncode == 0, result.stderr
    assert "facts" in json.loads(exported.read_text())
    result = run(
        f".venv/bin/python manage.py import_memory --username demo --agent {agent_id} {exported}",
        installation,
    )
    assert result.returncode == 0, result.stderr
    result = run(
        f".venv/bin/python manage.py consolidate_memory --username demo --agent {agent_id}",
        installation,
    )
    assert result.returncode == 0, result.stderr


def test_help_lists_the_projects_commands_under_their_own_heading(installation):
    result = run(".venv/bin/python manage.py help", installation)
    assert result.returncode == 0, result.stderr
    assert "only Django core commands are listed" not in result.stdout + result.stderr
    memory = result.stdout.split("[memory]\n", 1)[1].split("\n\n", 1)[0].split()
    for command in ("seed_demo", "export_memory", "import_memory", "consolidate_memory"):
        assert command in memory


def test_two_processes_starting_at_once_agree_on_one_secret_key(tmp_path):
    env = new_shell(tmp_path)
    script = "from django.conf import settings; print(settings.SECRET_KEY)"
    command = f'.venv/bin/python manage.py shell -c "{script}"'
    runs = [
        subprocess.Popen(command, shell=True, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    keys = {process.communicate(timeout=60)[0].split()[-1] for process in runs}
    assert len(keys) == 1 and len(keys.pop()) >= 50


def test_the_environment_key_wins_over_the_file(tmp_path):
    env = new_shell(tmp_path, SECRET_KEY="from-the-environment")
    script = "from django.conf import settings; print(settings.SECRET_KEY)"
    result = run(f'.venv/bin/python manage.py shell -c "{script}"', env)
    assert result.stdout.split()[-1] == "from-the-environment"
    assert not (tmp_path / "secret_key").exists()


def test_make_worker_without_a_broker_refuses_and_says_what_to_set(tmp_path):
    result = run("make worker", new_shell(tmp_path), timeout=60)
    assert result.returncode != 0
    assert "set REDIS_URL" in result.stdout + result.stderr
    assert "celery" not in result.stdout.lower().split("set redis_url")[0]


@pytest.mark.redis
def test_make_worker_with_a_broker_starts(tmp_path):
    redis = RedisServer().start()
    env = new_shell(tmp_path, REDIS_URL=redis.url)
    assert run(".venv/bin/python manage.py migrate --noinput", env).returncode == 0
    worker = Spawned(["make", "worker"], env, "make-worker")
    try:
        wait_for(lambda: " ready." in worker.output(), 90, "the worker ready")
        worker.signal(signal.SIGTERM)
        worker.process.wait(timeout=30)
    finally:
        worker.kill()
        redis.kill()
    assert "exited with" not in worker.output()


@pytest.mark.redis
def test_a_worker_that_cannot_start_is_not_restarted_forever(tmp_path):
    redis = RedisServer().start()
    env = new_shell(tmp_path, REDIS_URL=redis.url, DATABASE_URL="nonsense")
    worker = Spawned(["make", "worker"], env, "make-worker-bad")
    started = time.monotonic()
    try:
        worker.process.wait(timeout=120)
    finally:
        worker.kill()
        redis.kill()
    output = worker.output()
    assert worker.process.returncode != 0
    assert "DATABASE_URL:" in output
    assert output.count("; starting it again") == 2
    assert "not starting it again" in output
    assert time.monotonic() - started < 120
