"""Approximate token counts, deterministic and offline.

Providers count with their own tokenizers; what the budget needs is a stable estimate
that never downloads anything. About four characters a token holds for English text.
"""

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
