"""Typed readers for settings that come from environment variables.

Each helper refuses a bad value with a message that names the variable, so a typo
stops start-up instead of silently running with a default.
"""

import json
import os
import secrets
import time
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a whole number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(name: str, url: str) -> dict:
    """A DATABASES entry from ``postgres://user:password@host:port/dbname?options``, parsed
    by dj-database-url: query options (``sslmode=require``, ``connect_timeout``, ...) reach
    the driver's connection options. PostgreSQL (or a ``sqlite:///path``) only."""
    refused = ImproperlyConfigured(
        f"{name}: expected postgres://user:password@host:port/dbname, got {_redacted(url)!r}"
    )
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except (ValueError, dj_database_url.UnknownSchemeError):
        raise refused from None
    if config.get("ENGINE") not in _DATABASE_ENGINES or not config.get("NAME"):
        raise refused
    return config


def _redacted(url: str) -> str:
    """The URL without its password, for an error message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


_DATABASE_ENGINES = {"django.db.backends.postgresql", "django.db.backends.sqlite3"}


def check_redis_url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in {"redis", "rediss"} or not parts.hostname:
        raise ImproperlyConfigured(f"{name}: expected redis://host:port/db, got {url!r}")
    return url


def mcp_servers_from_env(name: str, file_name: str) -> dict[str, dict]:
    """The MCP servers the operator declares, by name: a JSON list in the variable ``name``
    or in the file that ``file_name`` points at (not both). Each entry is
    ``{"name": "files", "command": ["python", "server.py"]}`` (stdio) or
    ``{"name": "web", "url": "https://mcp.example/mcp"}`` (streamable HTTP). Agents only
    name servers from this list; commands and URLs never come from the database."""
    raw, source = os.environ.get(name, "").strip(), name
    path = os.environ.get(file_name, "").strip()
    if raw and path:
        raise ImproperlyConfigured(f"{name} and {file_name}: set one of them, not both")
    if path:
        source = f"{file_name} ({path})"
        try:
            raw = Path(path).read_text(encoding="utf-8")
        except OSError as err:
            raise ImproperlyConfigured(f"{source}: cannot read the file: {err}") from None
    if not raw.strip():
        return {}
    try:
        entries = json.loads(raw)
    except ValueError as err:
        raise ImproperlyConfigured(f"{source}: not valid JSON: {err}") from None
    if not isinstance(entries, list):
        raise ImproperlyConfigured(f"{source}: expected a JSON list of server objects")
    servers: dict[str, dict] = {}
    for entry in entries:
        problem = _mcp_entry_problem(entry)
        if problem:
            raise ImproperlyConfigured(f"{source}: {problem}: {entry!r}")
        if entry["name"] in servers:
            raise ImproperlyConfigured(f"{source}: two servers are named {entry['name']!r}")
        servers[entry["name"]] = entry
    return servers


def _mcp_entry_problem(entry: object) -> str:
    if not isinstance(entry, dict):
        return "an entry is not a JSON object"
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        return 'an entry needs a "name" (text without surrounding spaces)'
    unknown = set(entry) - {"name", "command", "url"}
    if unknown:
        return f"unknown field(s) {', '.join(sorted(unknown))}"
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        return 'give exactly one of "command" (stdio) or "url" (streamable HTTP)'
    if command is not None and (
        not isinstance(command, list)
        or not command
        or not all(isinstance(part, str) and part for part in command)
    ):
        return '"command" must be a non-empty list of strings'
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        return '"url" must be an http:// or https:// URL'
    return ""


def secret_key_from_env_or_file(name: str, path: Path) -> str:
    """``name`` from the environment, else the installation's own key in ``path``.

    The file is generated on first use (48 random bytes, mode 0600, created exclusively so
    two processes starting at once agree on one key) and read by every later process of
    the installation: management commands, the worker and the server need no variable.
    Several machines serving one site must share one key: set ``name`` on each.
    """
    value = env_str(name)
    if value:
        return value
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as error:
        raise ImproperlyConfigured(
            f"{name}: not set, and {path} cannot be created ({error.strerror}): "
            "set it to a long random string"
        ) from error
    else:
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_urlsafe(48) + "\n")
    for _ in range(50):  # another process may be writing it this very moment
        try:
            value = path.read_text().strip()
        except OSError as error:
            raise ImproperlyConfigured(f"{name}: not set, and {path} is unreadable") from error
        if value:
            return value
        time.sleep(0.02)
    raise ImproperlyConfigured(f"{name}: not set, and {path} is empty: delete it or set {name}")
