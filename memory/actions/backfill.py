"""Backfill sentence vectors: history stored before vectors existed gets them, once.

Recall by meaning (memory/stores/recall/vectors.py) reads stored vectors and embeds the
rows without one for that turn only, up to 240 messages a turn, again every turn: a
history written before migration 0016_embeddings (or under another encoder) costs that
until the drift check reaches its topic, which it never does for a closed one. This
computes and stores what is missing, in batches by primary key:

* idempotent: only rows without a vector of this encoder (a topic's: of its title and
  summary as they are now) are embedded; a second run finds nothing to do;
* resumable: each batch is stored in its own transaction and the rows done no longer
  match, so a run stopped anywhere (a killed worker, ``limit``) goes on where it stopped;
* bounded memory: one batch of ids and texts at a time, never a queryset of model rows.

Called by ``manage.py backfill_vectors`` and the ``memory.backfill_vectors`` Celery task.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from memory.stores.vectors import store_message_vectors, store_topic_vectors

#: Rows embedded and stored per transaction (the encoder embeds 64 texts per call).
BACKFILL_BATCH = 200


@dataclass(frozen=True)
class BackfillReport:
    messages: int  # message vectors stored
    topics: int  # topic vectors stored
    done: bool  # False: ``limit`` stopped the run with rows left to look at


def do_backfill_vectors(
    *, batch_size: int = BACKFILL_BATCH, limit: int | None = None
) -> BackfillReport:
    """Store the missing vectors of topics, then of messages, ``batch_size`` rows a
    transaction, stopping once ``limit`` vectors were stored (None: when none is missing)."""
    if batch_size < 1 or (limit is not None and limit < 1):
        raise ValueError("batch_size and limit must be at least 1")
    stored = {"topics": 0, "messages": 0}
    for kind, step in (("topics", store_topic_vectors), ("messages", store_message_vectors)):
        last = 0
        while True:
            left = None if limit is None else limit - stored["topics"] - stored["messages"]
            if left is not None and left <= 0:
                return BackfillReport(stored["messages"], stored["topics"], done=False)
            with transaction.atomic():
                count, read_to = step(after=last, batch_size=min(batch_size, left or batch_size))
            if read_to == last:
                break
            stored[kind] += count
            last = read_to
    return BackfillReport(stored["messages"], stored["topics"], done=True)
