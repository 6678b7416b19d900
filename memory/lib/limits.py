"""Every size limit of the input the server accepts, in one place (docs/limits.md).

Plain constants with no imports, so settings, the domain checks (memory/lib/validation.py),
the REST API, the websocket protocol, the agent's tools and admin all read the same
numbers. Characters are Unicode code points (Python ``len``); tokens are the estimate of
memory/lib/tokens.py (about four characters a token).
"""

# A user message (REST and websocket alike).
MAX_MESSAGE_CHARS = 16_000
# A session's or a topic's title.
MAX_TITLE_CHARS = 200
# A topic's summary (written by the summarizer or edited by the user).
MAX_SUMMARY_CHARS = 8_000
# A topic's active notes document: it rides along on every turn of the topic.
MAX_NOTES_CHARS = 20_000

# Durable facts ride in the stable prefix of every turn of every session of the scope.
MAX_FACT_KEY_CHARS = 200
# One value, measured as compact JSON (a text value counts its quotes and escapes).
MAX_FACT_VALUE_CHARS = 2_000
# How many facts one (user, agent, organization) document may hold.
MAX_FACTS = 400
# Approximate tokens of the whole facts document as the model reads it.
MAX_FACTS_TOKENS = 8_000

# JSON nesting (objects and arrays) accepted in a request body, a websocket frame or a
# tool call's arguments; deeper documents are refused before they are parsed.
MAX_JSON_DEPTH = 32

# A websocket text frame is refused (error ``frame_too_large``, socket kept open) above
# this many characters, before it is parsed: room for a maximal message with JSON escaping.
MAX_FRAME_CHARS = 6 * MAX_MESSAGE_CHARS + 1_000
# What the ASGI server itself buffers for one websocket message or frame, in bytes
# (daphne's websocket_max_message_size / websocket_max_frame_size). Frames between
# MAX_FRAME_CHARS and this reach the application and are answered ``frame_too_large``;
# past it the server drops the connection. Far above MAX_FRAME_CHARS on purpose: a client
# that overshoots gets an answer, not a dropped socket.
SERVER_MAX_FRAME_BYTES = 4 * 1024 * 1024
