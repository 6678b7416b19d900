"""The constants of the specification (spec/memory-architecture.txt)."""

# Topics with fewer than this many messages are forced to keepInMemory: false
# regardless of the LLM's include_in_memory response.
MIN_MEMORY_TURNS = 5

# The volatile suffix keeps at most this many trailing messages of the active topic.
ACTIVE_WINDOW_MESSAGES = 20

# A drift evaluation fires every five user-assistant pairs.
DRIFT_INTERVAL_MESSAGES = 10

# Exit triggers (navigation, tab hidden, socket disconnect) are coalesced this long.
EXIT_DEBOUNCE_SECONDS = 2.0

KEEP_IN_MEMORY_GUARD_ERROR = (
    "keepInMemory was set manually by the user; the agent cannot override it."
)
DEPRECATED_GUARD_ERROR = "deprecated was set manually by the user; the agent cannot override it."
USER_POSITION_GUARD_ERROR = (
    "the user has set this topic's memory state themselves; the agent cannot deprecate it. "
    "Ask the user to deprecate it with the topic's brain icon."
)
EMPTY_TOPIC_ERROR = "this topic has no messages yet: there is nothing to remember."
ACTIVE_TOPIC_DELETE_ERROR = (
    "the active topic cannot be deleted; start a new topic first, or delete the session."
)

# What a user may write as a topic's title and summary (the title column holds 200).
TOPIC_TITLE_MAX_CHARS = 200
TOPIC_SUMMARY_MAX_CHARS = 8000
