"""Live sockets follow the account: what an account change does to its open websockets.

Every socket joins its user's channel group (``user_group``). When the account changes in a
way that can end access, a notice goes to that group once the change commits, and each
socket re-checks the caller (chat/consumers.py) and closes itself if access ended:

- logout: the sockets opened with that login session close (other devices stay logged in);
- deactivation, a password change, deletion: every socket of the user re-checks, and one
  whose login session no longer names an active user with the current password closes;
- removal from an organization: every socket of the user re-checks its session's
  membership (``Session.objects.owned_by``).

Each frame re-checks the same way, so a missed notice (a channel-layer hiccup) still ends
access at the next frame. These receivers are the auth signals the brief asks for: they
only tell sockets to look again, the check itself is the one queryset every interface uses.
"""

from __future__ import annotations

import logging

from django.contrib.auth import (
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
    load_backend,
    user_logged_out,
)
from django.contrib.sessions.backends.base import SessionBase
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver
from django.utils.crypto import constant_time_compare
from rest_framework.authtoken.models import Token

from memory.infra.channels import group_send
from memory.models import Organization

logger = logging.getLogger(__name__)

# The message type a socket handles (SessionConsumer.account_changed).
ACCOUNT_CHANGED = "account.changed"


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def live_user(store: SessionBase):
    """The active user the login session names *now*, or None: after logout the session
    is gone, after deactivation the backend refuses the user, after a password change the
    session's hash no longer matches. Unlike ``django.contrib.auth.get_user`` it never
    flushes the session it reads (it is not the request's own)."""
    try:
        user_id = get_user_model()._meta.pk.to_python(store[SESSION_KEY])
        backend = load_backend(store[BACKEND_SESSION_KEY])
    except (KeyError, ValueError, ImportError):
        return None
    user = backend.get_user(user_id)
    if user is None:
        return None
    session_hash = store.get(HASH_SESSION_KEY) or ""
    if not constant_time_compare(session_hash, user.get_session_auth_hash()):
        return None
    return user


def notify_account_changed(user_ids, *, session_key: str | None = None) -> None:
    """Tell the users' sockets to re-check, once the current transaction commits.
    With ``session_key``, only the sockets of that login session close (a logout)."""
    message = {"type": ACCOUNT_CHANGED, "session_key": session_key}

    def send() -> None:
        for user_id in set(user_ids):
            try:
                group_send(user_group(user_id), message)
            except Exception:  # the account change itself has happened: never undo it
                logger.exception("could not notify the sockets of user %s", user_id)

    transaction.on_commit(send)


@receiver(user_logged_out)
def _logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        notify_account_changed([user.pk], session_key=request.session.session_key)


@receiver(post_save, sender=get_user_model())
def _password_changed(sender, instance, created, **kwargs) -> None:
    # set_password() leaves the new password in ``_password`` until the save is done: the
    # API tokens issued before the change stop working with it.
    if not created and getattr(instance, "_password", None) is not None:
        Token.objects.filter(user=instance).delete()


@receiver(post_save, sender=get_user_model())
def _user_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    # A login only stamps last_login: nothing to re-check.
    if created or (update_fields is not None and set(update_fields) == {"last_login"}):
        return
    notify_account_changed([instance.pk])


@receiver(post_delete, sender=get_user_model())
def _user_deleted(sender, instance, **kwargs) -> None:
    notify_account_changed([instance.pk])


@receiver(m2m_changed, sender=Organization.members.through)
def _membership_changed(sender, instance, action, reverse, pk_set, **kwargs) -> None:
    if action == "pre_clear" and not reverse:
        # After the clear nobody is left to name: remember who was a member.
        instance._members_before_clear = list(instance.members.values_list("pk", flat=True))
    elif action in {"post_remove", "post_clear"}:
        if reverse:  # user.organizations.remove(...) / .clear()
            notify_account_changed([instance.pk])
        elif action == "post_remove":
            notify_account_changed(pk_set or [])
        else:
            notify_account_changed(getattr(instance, "_members_before_clear", []))
