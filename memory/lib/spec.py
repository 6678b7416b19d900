"""The constants of the specification (spec/memory-architecture.txt)."""

# Topics with fewer than this many messages are forced to keepInMemory: false
# regardless of the LLM's include_in_memory response.
MIN_MEMORY_TURNS = 5

# The volatile suffix keeps at most this many trailing messages of the active topic.
ACTIVE_WINDOW_MESSAGES = 20

# The window is trimmed this many messages at a time, not one a turn, so its first message
# (and with it the provider's cached prefix) stays put while the block fills: it holds
# between ACTIVE_WINDOW_MESSAGES - ACTIVE_WINDOW_BLOCK + 1 and ACTIVE_WINDOW_MESSAGES
# messages (5 to 20: at its shortest, the last two exchanges and the new message).
# bench/prompt_cache.py, 222 turns over six subjects, share of prompt tokens cached:
# sliding one at a time 60 %; blocks of 5: 81 %, 10: 88 %, 15: 90.3 %, 16: 90.6 %,
# 18: 91.2 %, 20: 91.4 % (all within a point after later changes to the prefixes). Past
# 10 the gain flattens while the shortest window shrinks (one message at 20); 16 cuts the
# uncached tokens by a quarter against 10 and still keeps the last two exchanges.
ACTIVE_WINDOW_BLOCK = 16

# A drift evaluation fires every five user-assistant pairs.
DRIFT_INTERVAL_MESSAGES = 10

# Exit triggers (navigation, tab hidden, socket disconnect) are coalesced this long.
EXIT_DEBOUNCE_SECONDS = 2.0
