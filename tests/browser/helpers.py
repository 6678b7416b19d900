"""Helpers for the browser tests."""

from __future__ import annotations

import threading


def in_thread(fn, *args, **kwargs):
    """Run server-side work the way a worker would: off Playwright's event-loop thread
    (async_to_sync refuses to run inside a running loop), committing as it goes."""
    from django.db import connection

    outcome: dict = {}

    def run():
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as err:  # re-raised in the test
            outcome["error"] = err
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
