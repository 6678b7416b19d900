"""Login throttling for the login page and the admin's: a small cache-based limiter.

After ``LOGIN_FAILURE_LIMIT`` failed attempts for one username from one address, every
attempt for it from there (the right password included) is refused until
``LOGIN_LOCKOUT_SECONDS`` have passed since the first failure; a success clears the count.
A second, wider count per address (ten times the limit) slows guessing across usernames,
and a third per account, from any address (four times the limit), stops guessing one
password from many addresses. The count lives in the shared cache (Redis in the full
setup), so several servers share it.

The username is counted as login reads it: the form field's cleaned value (surrounding
whitespace stripped, as authentication sees it), NFKC-folded (as Django's ``normalize_username``
does) and case-folded, so ``ａｌｉｃｅ``, ``𝐚𝐥𝐢𝐜𝐞`` and ``ALICE`` share alice's count. The
address is the connection's peer; ``X-Forwarded-For`` is read only when the peer is one of
``FORWARDED_ALLOW_IPS`` (the proxy in front), and then the rightmost entry that is not one
of those proxies is the client: a client can prepend entries, never replace the one the
proxy appended.
"""

from __future__ import annotations

import hashlib
import unicodedata

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError

THROTTLED_MESSAGE = "Too many failed attempts. Wait a few minutes, then try again."


def client_address(request) -> str:
    """The client's address: the peer, or the rightmost untrusted X-Forwarded-For hop."""
    if request is None:
        return "?"
    peer = request.META.get("REMOTE_ADDR") or "?"
    trusted = set(settings.FORWARDED_ALLOW_IPS)
    if peer not in trusted and "*" not in trusted:
        return peer
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    for hop in reversed([hop for hop in hops if hop]):
        if hop not in trusted:
            return hop
    return peer


def folded_username(username: str) -> str:
    """The username as login finds it (NFKC), case-folded, then NFKC again."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", username).casefold())


def _keys(request, username: str) -> list[tuple[str, int]]:
    address = client_address(request)
    account = folded_username(username)
    who = hashlib.sha256(f"{account}|{address}".encode()).hexdigest()[:32]
    whose = hashlib.sha256(account.encode()).hexdigest()[:32]
    limit = settings.LOGIN_FAILURE_LIMIT
    return [
        (f"login-failures:{who}", limit),
        (f"login-failures-from:{address}", limit * 10),
        (f"login-failures-of:{whose}", limit * 4),
    ]


class ThrottledLoginMixin:
    """For an AuthenticationForm: refuse a throttled caller before checking the password."""

    throttled = False

    def _login_name(self) -> str:
        """The name as the form authenticates it: its field's cleaned value (stripped of
        surrounding whitespace), so ``'alice '`` and ``' alice'`` count as alice."""
        if "username" in getattr(self, "cleaned_data", {}):
            return str(self.cleaned_data["username"] or "")
        return str(self.data.get("username") or "").strip()

    def clean(self):
        keys = _keys(self.request, self._login_name())
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
        cache.delete(_keys(self.request, self._login_name())[0][0])


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass
