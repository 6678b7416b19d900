"""Typed readers for settings that come from environment variables.

Each helper refuses a bad value with a message that names the variable, so a typo
stops start-up instead of silently running with a default.
"""

import os
from urllib.parse import unquote, urlsplit

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
    """Turn ``postgres://user:password@host:port/dbname`` into a DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"} or not parts.path.strip("/"):
        raise ImproperlyConfigured(
            f"{name}: expected postgres://user:password@host:port/dbname, got {url!r}"
        )
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name}: the port in {url!r} is not a number") from None
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.strip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(port or ""),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


def check_redis_url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in {"redis", "rediss"} or not parts.hostname:
        raise ImproperlyConfigured(f"{name}: expected redis://host:port/db, got {url!r}")
    return url


def redis_url_with_db(url: str, db: int) -> str:
    """The same server as ``url`` but another database number."""
    parts = urlsplit(url)
    return parts._replace(path=f"/{db}").geturl()
