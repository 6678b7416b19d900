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
    ],
)
def test_a_bad_setting_stops_start_up_naming_the_variable(name, value):
    result = check_with({name: value})
    assert result.returncode != 0
    assert f"{name}:" in result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    result = check_with({"DEBUG": "false", "SECRET_KEY": ""})
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


def test_a_bad_database_url_is_refused_without_echoing_its_password():
    result = check_with({"DATABASE_URL": "postgres://app:s3cret@db.example:port/x"})
    assert result.returncode != 0
    assert "DATABASE_URL:" in result.stderr and "s3cret" not in result.stderr
