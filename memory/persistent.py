"""Persistent memory: the block of promoted and deprecated topics every session sees.

It is read through the Django cache under the ``agentId:userId:orgId`` scope key, and
every change that alters it invalidates that key.
"""

from django.core.cache import cache
from django.db import transaction


def memory_cache_key(scope_key: str) -> str:
    return f"persistent-memory:{scope_key}"


def invalidate_persistent_memory(scope_key: str) -> None:
    """Drop the cached block now and again after commit.

    Now, so the rest of this transaction reads fresh; after commit, so a concurrent
    reader that refilled the cache from the pre-commit rows does not leave it stale.
    """
    key = memory_cache_key(scope_key)
    cache.delete(key)
    transaction.on_commit(lambda: cache.delete(key))
