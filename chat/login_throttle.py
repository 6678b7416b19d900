"""Login throttling for the login page and the admin's: a small cache-based limiter.

After ``LOGIN_FAILURE_LIMIT`` failed attempts for one username from one address, every
attempt for it from there (the right password included) is refused until
``LOGIN_LOCKOUT_SECONDS`` have passed since the first failure; a success clears the count.
A second, wider count per address (ten times the limit) slows guessing across usernames.
The count lives in the shared cache (Redis in the full setup), so several servers share it.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError

THROTTLED_MESSAGE = "Too many failed attempts. Wait a few minutes, then try again."


def _keys(request, username: str) -> list[tuple[str, int]]:
    address = (request.META.get("REMOTE_ADDR") or "?") if request is not None else "?"
    who = hashlib.sha256(f"{username.casefold()}|{address}".encode()).hexdigest()[:32]
    limit = settings.LOGIN_FAILURE_LIMIT
    return [(f"login-failures:{who}", limit), (f"login-failures-from:{address}", limit * 10)]


class ThrottledLoginMixin:
    """For an AuthenticationForm: refuse a throttled caller before checking the password."""

    throttled = False

    def clean(self):
        username = self.data.get("username") or ""
        keys = _keys(self.request, str(username))
        if any((cache.get(key) or 0) >= limit for key, limit in keys):
            self.throttled = True
            raise ValidationError(THROTTLED_MESSAGE, code="throttled")
        try:
            return super().clean()
        except ValidationError:
            for key, _ in keys:
                cache.add(key, 0, timeout=settings.LOGIN_LOCKOUT_SECONDS)
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr: start again
                    cache.set(key, 1, timeout=settings.LOGIN_LOCKOUT_SECONDS)
            raise

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        cache.delete(_keys(self.request, str(self.data.get("username") or ""))[0][0])


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass
