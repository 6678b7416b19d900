"""The offline model: a deterministic stand-in for when no model is configured, so the
application (and its memory tools) works without a key and says plainly that it is offline."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator

from memory.lib.tool_words import describe_tool_result
from memory.llm.gist import gist
from memory.llm.types import Completion, LLMError, ToolCall
from memory.text.commands import parse_memory_command

DEFAULT_MODEL = "gpt-4o-mini"

_COMMAND_HELP = (
    "/remember KEY = VALUE stores a durable fact, "
    "/forget KEY removes one, "
    "/note TEXT adds to this topic's notes."
)
_SETUP_HELP = (
    f"To use a real model, set OPENAI_API_KEY (and DRIFTLESS_MODEL, default {DEFAULT_MODEL}), "
    "or set OPENAI_BASE_URL to a local OpenAI-compatible server "
    "(Ollama, vLLM, LM Studio, llama.cpp server) and DRIFTLESS_MODEL to its model name."
)

_OFFLINE_NOTICE = "Offline mode: no language model is configured, so I cannot answer that."


class OfflineModel:
    """A deterministic model for when none is configured.

    It says plainly that it is offline and how to connect a model. Given a memory slash
    command it answers with the tool call the command stands for (the turn carries the
    commands out itself, as the user, before any model is asked), and after a tool result
    it says in a sentence what the call did.
    """

    name = "offline"
    offline = True

    def stream(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        prompt_cache_key: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[str | Completion]:
        """Yield the reply word by word (so streaming UIs behave), then the Completion."""
        content, tool_calls = _offline_answer(messages)
        yield from re.findall(r"\S+\s*", content)
        yield Completion(content=content, tool_calls=tool_calls, usage=None, model=self.name)

    def complete_json(
        self,
        *,
        messages: list[dict],
        schema: dict | None = None,
        schema_name: str = "answer",
        max_tokens: int = 0,
    ) -> dict:
        """A summary call gets the conversation's gist (memory/llm/gist.py: a title and a
        summary from the user's own salient sentences, never promoted); any other call
        fails, so its caller takes its deterministic fallback."""
        asked = _summary_request(messages)
        if asked is None:
            raise LLMError("offline model: no model configured")
        said, previous_title, previous_summary = asked
        found = gist(said, previous_title=previous_title, previous_summary=previous_summary)
        if not found.title or not found.summary:
            raise LLMError("offline model: nothing to summarize")
        return {"title": found.title, "summary": found.summary, "include_in_memory": False}


# The summary call (memory/actions/summarize.py): the specification's prompt, then one
# message holding "Summary so far (title: …):", the transcript, and the notes.
_SUMMARY_PROMPT_START = "Summarize this conversation."
_PREVIOUS = re.compile(r"^Summary so far \(title: (?P<title>.*)\):\n(?P<summary>.*)", re.S)
_TRANSCRIPT_HEADINGS = ("Conversation since then:\n", "Conversation:\n")
_NOTES_HEADING = "\n\nNotes for this topic:\n"
_ENTRY = re.compile(r"^(User|Assistant|Assistant called|Tool result \([^)]*\)): ?", re.M)


def _summary_request(messages: list[dict]) -> tuple[list[str], str, str] | None:
    """The user's messages, the previous title and summary of a summary call; None for
    any other call."""
    if not messages or not _text(messages[0]).startswith(_SUMMARY_PROMPT_START):
        return None
    text = _text(messages[-1])
    previous_title = previous_summary = ""
    heading = next((h for h in _TRANSCRIPT_HEADINGS if h in text), None)
    if heading is None:
        return [], "", ""
    before, transcript = text.split(heading, 1)
    transcript = transcript.split(_NOTES_HEADING, 1)[0]
    match = _PREVIOUS.match(before.strip())
    if match:
        previous_title, previous_summary = match["title"], match["summary"].strip()
    return _user_lines(transcript), previous_title, previous_summary


def _user_lines(transcript: str) -> list[str]:
    """The user's messages of a transcript (a message may run over several lines)."""
    starts = list(_ENTRY.finditer(transcript))
    said = []
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(transcript)
        if start.group(1) == "User":
            said.append(transcript[start.end() : end].strip())
    return said


def _offline_answer(messages: list[dict]) -> tuple[str, tuple[ToolCall, ...]]:
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return _tool_result_reply(last, messages), ()
    if last.get("role") == "user":
        command = _slash_command(_text(last), call_id=_offline_call_id(messages))
        if command is not None:
            return command
    return _offline_reply(messages), ()


def _slash_command(text: str, *, call_id: str) -> tuple[str, tuple[ToolCall, ...]] | None:
    """Turn a memory slash command into its tool call; None when the text is not one.
    (The turn carries commands out itself; this is for a direct caller of the model.)"""
    command = parse_memory_command(text)
    if command is None:
        return None
    if command.tool is None:
        return command.usage, ()
    return "", (_tool_call(call_id, command.tool, command.arguments),)


def _tool_call(call_id: str, name: str, arguments: dict[str, str]) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def _offline_call_id(messages: list[dict]) -> str:
    """A deterministic id that still differs between turns of one conversation."""
    digest = hashlib.sha256(
        json.dumps(messages, sort_keys=True, default=str).encode("utf-8")
    ).hexdigest()
    return f"offline-call-{digest[:12]}"


def _tool_result_reply(result: dict, messages: list[dict]) -> str:
    """What the command did, in a sentence ("Remembered: favourite colour = teal")."""
    function = _tool_function(result.get("tool_call_id"), messages)
    name = function.get("name") or "tool"
    return describe_tool_result(name, function.get("arguments") or "{}", _text(result))


def _tool_function(call_id: object, messages: list[dict]) -> dict:
    """The name and arguments of the call that produced a result, found by its id."""
    for message in reversed(messages):
        for call in message.get("tool_calls") or ():
            if call.get("id") == call_id:
                return call.get("function") or {}
    return {}


def _offline_reply(messages: list[dict]) -> str:
    """A short, honest reply that never repeats the user's words.

    The first reply of a conversation says how to connect a model; later ones only that
    none is connected, so a long conversation with the offline model is still the user's
    words plus one short line per turn (what drift detection and summaries then see).
    """
    if any(m.get("role") == "assistant" and _text(m).strip() for m in messages):
        return f"{_OFFLINE_NOTICE} Memory commands work offline: /remember, /forget, /note."
    return f"{_OFFLINE_NOTICE} {_SETUP_HELP} Memory commands work offline: {_COMMAND_HELP}"


def _text(message: dict) -> str:
    """The text of a message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""
