"""Bad settings stop start-up with a message that names the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def check_with(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, "DEBUG": "true", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "nonsense"),
        ("DATABASE_URL", "mysql://db/x"),
        ("REDIS_URL", "localhost:6379"),
        ("DEBUG", "maybe"),
        ("LLM_TIMEOUT_SECONDS", "soon"),
        ("DRIFT_SCAN_BACK", "0"),
        ("STREAM_BATCH_SECONDS", "-1"),
    ],
)
def test_a_bad_setting_stops_start_up_naming_the_variable(name, value):
    result = check_with({name: value})
    assert result.returncode != 0
    assert f"{name}:" in result.stderr


def test_production_without_a_secret_key_or_a_usable_key_file_refuses_naming_it(tmp_path):
    """Without SECRET_KEY the installation's generated key file serves (driftless/env.py);
    where it cannot be read, start-up stops naming the variable."""
    (tmp_path / "secret_key").mkdir()  # unreadable as a file, even for root
    result = check_with({"DEBUG": "false", "SECRET_KEY": "", "DRIFTLESS_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "SECRET_KEY:" in result.stderr


def test_the_embedded_default_starts_with_nothing_set(tmp_path):
    result = check_with({"DRIFTLESS_VAR_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_database_url_options_reach_the_connection(tmp_path):
    """Hosted PostgreSQL asks for sslmode=require: it must reach the driver, not vanish."""
    script = (
        "from django.db import connection; params = connection.get_connection_params(); "
        "print(params['sslmode'], params['connect_timeout'], connection.settings_dict['NAME'])"
    )
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", script],
        cwd=ROOT,
        env={
            **clean,
            "DEBUG": "true",
            "DRIFTLESS_VAR_DIR": str(tmp_path),
            "DATABASE_URL": "postgres://app:s3cret@db.example:6543/ledger?sslmode=require"
            "&connect_timeout=7",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["require", "7", "ledger"]


@pytest.mark.parametrize(("size", "expected"), [("", "40 0"), ("12", "12 0"), ("0", "None 60")])
def test_each_server_process_keeps_a_bounded_pool_of_database_connections(tmp_path, size, expected):
    """Turn threads borrow a pooled connection (CONN_MAX_AGE must then be 0);
    DATABASE_POOL_SIZE=0 falls back to persistent per-thread connections."""
    script = (
        "from django.conf import settings; db = settings.DATABASES['default']; "
        "pool = db.get('OPTIONS', {}).get('pool'); "
        "print(pool and pool['max_size'], db['CONN_MAX_AGE'], db['OPTIONS'].get('sslmode'))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    env = {
        **clean,
        "DEBUG": "true",
        "DRIFTLESS_VAR_DIR": str(tmp_path),
        "DATABASE_URL": "postgres://app@db.example:5432/ledger?sslmode=require",
    }
    if size:
        env["DATABASE_POOL_SIZE"] = size
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [*expected.split(), "require"]


def test_a_bad_database_url_is_refused_without_echoing_its_password():
    result = check_with({"DATABASE_URL": "postgres://app:s3cret@db.example:port/x"})
    assert result.returncode != 0
    assert "DATABASE_URL:" in result.stderr and "s3cret" not in result.stderr
