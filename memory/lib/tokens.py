"""Approximate token counts, deterministic and offline.

Providers count with their own tokenizers; what the budget needs is a stable estimate
that never downloads anything. About four characters a token holds for English text.
"""

from collections.abc import Sequence

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def oldest_to_drop(costs: Sequence[int], budget: int) -> int:
    """How many of the first (oldest) items to drop so the rest fit ``budget``: FIFO
    truncation, the newest kept."""
    total, start = sum(costs), 0
    while start < len(costs) and total > budget:
        total -= costs[start]
        start += 1
    return start
