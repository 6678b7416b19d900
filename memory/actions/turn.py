"""The agent turn: one user message in, one reply out, with tool calls in between.

The order is the point. The user's message is stored first, so it is never lost whatever
fails next; the context stack is assembled once, before the model sees anything; the
model's answer streams to the session's clients as ``reply.delta`` events; when it calls
tools, its tool-call message is stored, the built-ins (then MCP tools) run and store their
results, and the model is asked again with those appended, for at most
``MAX_TOOL_ROUNDS`` rounds; the final reply is stored with the provider's token usage.

A turn ends with an answer, whatever a small model does: the request after the last
round offers no tools, so the model answers from what it has; a call it makes again
with the same arguments is answered from its earlier result and the next request offers
no tools either; a tool it invented is an error result it reads; an endpoint's server
error on a request with tools is asked once more without them. A model failure ends the
turn with a stored error record and a ``turn.error`` event; the client may then retry,
which runs the turn again without storing the message twice.

The user's memory commands (``/remember KEY = VALUE``, ``/forget KEY``, ``/note TEXT``)
never reach the model: the turn carries them out as the user and stores them as a tool
round of the agent would be (the call, its result, a sentence), so a fact set that way is
the user's, whatever model is configured.

A turn is a plain synchronous function: the websocket consumer runs it in a worker
thread, the REST endpoint calls it directly. One turn per session runs at a time, across
processes (a lease in the database, memory/stores/leases.py), so two tabs cannot interleave two
replies; a server that dies mid-turn frees the session within about 30 seconds, and its
turn gets an error record ("the reply was interrupted") the user can retry.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings
from django.db import connection, transaction

from memory.actions.context import ContextStack, assemble_context, render_window
from memory.actions.mcp import McpToolSource, declared_servers
from memory.actions.memory_trace import memory_trace
from memory.actions.scheduling import note_message_stored
from memory.actions.tools import CallResults, dispatch_tool_calls
from memory.events import (
    flush_outbox,
    messages_deleted,
    outbox,
    publish,
    publish_on_commit,
    reply_delta,
    turn_done,
    turn_error,
    turn_started,
)
from memory.lib.deltas import DeltaBatcher
from memory.lib.errors import Conflict, Refused, log_error, public_failure, without_addresses
from memory.lib.tool_words import describe_tool_result
from memory.lib.validation import check_message_content
from memory.llm import ChatModel, Completion, LLMError, ToolCall, Usage, get_chat_model
from memory.llm.pump import Pump
from memory.models import FactActor, Message, Session, SessionUnreachable, Topic
from memory.stores import leases, stops
from memory.stores.messages import store_message
from memory.text.commands import MemoryCommand, parse_memory_command

logger = logging.getLogger(__name__)

# How many times one turn may answer with tool calls before it must reply in words.
MAX_TOOL_ROUNDS = 5
INTERNAL_ERROR_TEXT = "the reply failed because of an internal error; try again"


class AccessEnded(Refused):
    """The session's user lost access mid-turn (left the organization, was deactivated):
    the model is not asked again."""

    code = "access_ended"
    status = 403

    def __init__(self) -> None:
        super().__init__("the turn stopped: you no longer have access to this session")


class NothingToRetry(Conflict):
    """The active topic has no unanswered user message to run the turn for."""

    code = "nothing_to_retry"


@dataclass
class TurnResult:
    """What a turn stored, for the REST endpoint (websocket clients get events)."""

    turn_id: str
    user_message: Message
    activity: list[Message] = field(default_factory=list)  # tool calls and their results
    reply: Message | None = None
    error: Message | None = None
    failure: Literal["model", "internal"] | None = None
    stopped: bool = False  # the user stopped the reply; what had streamed is stored
    reply_versions: list[dict] = field(default_factory=list)  # a regenerated reply's earlier
    usage: Usage = field(default_factory=lambda: Usage(0, 0, 0))

    def add_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = Usage(
                prompt_tokens=self.usage.prompt_tokens + usage.prompt_tokens,
                cached_tokens=self.usage.cached_tokens + usage.cached_tokens,
                completion_tokens=self.usage.completion_tokens + usage.completion_tokens,
            )


def do_send_message(*, session: Session, content: str) -> TurnResult:
    """Store the user's message and run the turn for it. Raises TurnBusy (nothing is
    stored then) when another turn of the session is running, InvalidInput for content
    that is not a message (memory/lib/validation.py)."""
    content = check_message_content(content)
    return _turn(session, lambda: _store(session, role=Message.Role.USER, content=content))


def check_retry(*, session: Session) -> Message:
    """The user message a retry answers: the last one of the active topic, provided no
    final reply followed it. Raises NothingToRetry otherwise."""
    topic = Topic.objects.get(session_id=session.pk, is_active=True)
    last = topic.messages.order_by("-seq").first()
    if last is None or last.is_reply:
        raise NothingToRetry("the last message already has its reply")
    user_message = topic.messages.filter(role=Message.Role.USER).order_by("-seq").first()
    if user_message is None:
        raise NothingToRetry("there is no message of yours to answer in this topic")
    return user_message


def do_retry_turn(*, session: Session) -> TurnResult:
    """Run the turn again for the unanswered user message, without storing it twice."""
    return _turn(session, lambda: check_retry(session=session))


class NothingToRegenerate(Conflict):
    """The active topic does not end with a reply of the agent."""

    code = "nothing_to_regenerate"


def do_regenerate_turn(*, session: Session) -> TurnResult:
    """Replace the last reply: take it out of the thread (under the session's lock, so no
    other turn runs meanwhile) and run the turn again for the message it answered, by the
    retry path. The tool activity before it stays, as the record of what was done.
    Raises NothingToRegenerate when the active topic does not end with a reply."""
    return _turn(session, lambda: _take_back_last_reply(session))


def _take_back_last_reply(session: Session) -> Message:
    topic = Topic.objects.get(session_id=session.pk, is_active=True)
    last = topic.messages.order_by("-seq").first()
    if last is None or not last.is_reply:
        raise NothingToRegenerate("there is no reply to regenerate: the last message is not one")
    user_message = _answered_by(topic, last)
    # The reply replaced is kept as an earlier version of the next one (never in context).
    user_message.reply_versions = earlier_versions(last)
    reply_id = last.pk
    last.delete()
    publish_on_commit(session.pk, messages_deleted(topic_id=topic.pk, message_ids=[reply_id]))
    return user_message


class NothingToEdit(Conflict):
    """The message to edit is not the user's last one in the active topic (any more)."""

    code = "nothing_to_edit"


def do_edit_turn(*, session: Session, message_id: int, content: str) -> TurnResult:
    """Edit and resend the user's last message: it and what answered it (the reply, any
    tool activity, an error record) are taken out of the thread, the edited text is
    stored as the user's message and answered. What a tool already did (a fact set) stays
    done. Raises NothingToEdit when ``message_id`` is not the last user message of the
    active topic, InvalidInput for content that is not a message."""
    content = check_message_content(content)
    return _turn(session, lambda: _replace_last_message(session, message_id, content))


def _replace_last_message(session: Session, message_id: int, content: str) -> Message:
    topic = Topic.objects.get(session_id=session.pk, is_active=True)
    last = topic.messages.filter(role=Message.Role.USER).order_by("-seq").first()
    if last is None or last.pk != message_id:
        raise NothingToEdit("only your last message in the active topic can be edited")
    gone = list(
        topic.messages.filter(seq__gte=last.seq).order_by("seq").values_list("pk", flat=True)
    )
    with transaction.atomic():  # the old message goes only with the new one stored
        Message.objects.filter(pk__in=gone).delete()
        publish_on_commit(session.pk, messages_deleted(topic_id=topic.pk, message_ids=gone))
        return _store(
            session, role=Message.Role.USER, content=content, versions=earlier_versions(last)
        )


# How many earlier versions a message keeps (the oldest go first).
MAX_VERSIONS = 10


def earlier_versions(message: Message) -> list[dict]:
    """The versions a message replacing ``message`` keeps: ``message``'s own earlier ones
    and ``message`` itself, at most ``MAX_VERSIONS``."""
    own = {"content": message.content, "created_at": message.created_at.isoformat()}
    if message.stopped:
        own["stopped"] = True
    return [*(message.versions or []), own][-MAX_VERSIONS:]


def _answered_by(topic: Topic, reply: Message) -> Message:
    """The user message a reply answers (the last one of the topic before it)."""
    user_message = (
        topic.messages.filter(role=Message.Role.USER, seq__lt=reply.seq).order_by("-seq").first()
    )
    if user_message is None:
        raise NothingToRegenerate("there is no message of yours for this reply to answer")
    return user_message


def _turn(session: Session, user_message: Callable[[], Message]) -> TurnResult:
    """Under the session's lock, take the user message (stored, or found for a retry) and
    answer it. The turn's events leave in three deliveries, whatever the tool rounds: its
    start (the user's message, turn.started) before the model is asked, the reply deltas
    as they stream, and its end (the reply's last delta, the reply, turn.done) once the
    lock is released."""
    with outbox(session.pk):
        with (
            leases.turn_leases(
                session_id=session.pk,
                user_id=session.user_id,
                organization_id=session.organization_id,
            ),
            stops.watching(session.pk) as stop,
        ):
            result = _run_turn(session=session, user_message=user_message(), stop=stop)
        _announce_done(session, result)
        _give_back_connection()  # before the end is published
    return result


def do_stop_turn(*, session: Session) -> bool:
    """Ask the session's running turn to stop (the user's Stop, from any tab, process or
    interface): it stores what had streamed, marked stopped. Whether a turn was running."""
    return stops.request_stop(session_id=session.pk)


def _run_turn(*, session: Session, user_message: Message, stop: stops.StopSignal) -> TurnResult:
    result = TurnResult(turn_id=uuid.uuid4().hex, user_message=user_message)
    result.reply_versions = getattr(user_message, "reply_versions", [])
    publish(session.pk, turn_started(result.turn_id, user_message_id=user_message.pk))
    try:
        command = parse_memory_command(user_message.content)
        if command is not None:
            _answer_command(session=session, command=command, result=result)
        else:
            with McpToolSource(declared_servers(session.agent.mcp_servers)) as mcp:
                stack = assemble_context(
                    session=session,
                    extra_tools=mcp.tool_schemas,
                    working_memory=mcp.status_note(),
                )
                _converse(session=session, stack=stack, mcp=mcp, result=result, stop=stop)
    except AccessEnded as err:
        _fail(session, result, failure="internal", text=str(err))
    except LLMError as err:
        # The user reads why, without the endpoint's address; the log has it all.
        error_id = log_error("turn %s of session %s: %s", result.turn_id, session.pk, err)
        _fail(session, result, failure="model", text=public_failure(model_failure(err), error_id))
    except Exception as err:
        error_id = log_error(
            "turn %s of session %s failed", result.turn_id, session.pk, exc_info=err
        )
        _fail(
            session, result, failure="internal", text=public_failure(INTERNAL_ERROR_TEXT, error_id)
        )
    return result


# Model failures whose text goes on with the provider's own words, or a connection error.
_PROVIDER_TEXT_AFTER = ("model endpoint error:", "connection to model endpoint")


def model_failure(err: LLMError) -> str:
    """What a user reads of a model failure: what went wrong, never the provider's own
    text (organization and project ids, account details): that is in the log only."""
    if err.status is not None:
        return f"model endpoint returned HTTP {err.status}"
    text = str(err)
    if text.startswith(_PROVIDER_TEXT_AFTER):  # what follows the colon is the provider's
        return without_addresses(text).split(": ", 1)[0]
    return text  # our own account of it (a timeout, a stall, a cut stream)


def _announce_done(session: Session, result: TurnResult) -> None:
    """Publish ``turn.done`` once the session lock is released: a client that sends its
    next message the moment it sees the event must not be refused as busy."""
    publish_on_commit(
        session.pk,
        turn_done(
            result.turn_id,
            reply_message_id=result.reply.pk if result.reply else None,
            ok=result.failure is None,
            stopped=result.stopped,
        ),
    )


def _converse(
    *,
    session: Session,
    stack: ContextStack,
    mcp: McpToolSource,
    result: TurnResult,
    stop: stops.StopSignal,
) -> None:
    """Ask the model, run the tools it calls, ask again; store the final reply (what had
    streamed, marked stopped, when the user stops it)."""
    # The session's pick (where the operator allows it), else the agent's own model, else
    # the settings'; resolved now, so a change applies from this turn with no restart.
    model = get_chat_model("chat", session=session)
    messages = list(stack.messages)
    tools, calls = stack.tools, CallResults()
    for round_number in range(MAX_TOOL_ROUNDS + 1):
        if round_number and not session.still_reachable():
            raise AccessEnded()
        if round_number == MAX_TOOL_ROUNDS:
            tools = []  # the last request: the model answers from what it has
        completion, tools = _ask(model, messages, tools, session, result.turn_id, stop)
        result.add_usage(completion.usage)
        # Whatever of the answer is stored next is stored only while its user may still
        # reach the session (_store_answer): they may have been removed while it streamed.
        # Only an error record then stays (AccessEnded), in a session its removed user can
        # no longer open.
        if stop.requested():  # what had streamed is the reply (any tool call is dropped)
            result.stopped = True
            result.reply = _store_answer(
                session,
                role=Message.Role.ASSISTANT,
                content=completion.content,
                stopped=True,
                memory_trace=memory_trace(stack.carried, result.activity),
                recalled=stack.recalled,
                versions=result.reply_versions,
                **_usage(completion),
            )
            return
        if not completion.tool_calls or not tools:
            result.reply = _store_answer(
                session,
                role=Message.Role.ASSISTANT,
                content=_reply_text(completion, after_tools=round_number > 0),
                memory_trace=memory_trace(stack.carried, result.activity),
                recalled=stack.recalled,
                versions=result.reply_versions,
                **_usage(completion),
            )
            return
        call_message = _store_answer(
            session,
            role=Message.Role.ASSISTANT,
            content=completion.content,
            tool_calls=_stored_calls(completion.tool_calls),
            **_usage(completion),
        )
        tool_messages = dispatch_tool_calls(
            session=session, tool_calls=completion.tool_calls, other=mcp, results=calls
        )
        _note_stored(session, tool_messages)
        result.activity += [call_message, *tool_messages]
        messages += render_window([_row(message) for message in (call_message, *tool_messages)])
        if calls.repeated:
            tools = []  # a model calling the same tool again is looping: it answers now


def _ask(
    model: ChatModel,
    messages: list[dict],
    tools: list[dict],
    session: Session,
    turn_id: str,
    stop: stops.StopSignal,
) -> tuple[Completion, list[dict]]:
    """One model answer, and the tools it was offered. An endpoint's server error on a
    request with tools (a small model invents a tool, the server fails to parse its call:
    HTTP 500) is asked once more without them, so the turn still gets an answer."""
    try:
        return _stream(model, messages, tools, session, turn_id, stop), tools
    except LLMError as err:
        # Only a 500: an overloaded endpoint (503) or a refused request (4xx) fails again.
        if not tools or err.status != 500:
            raise
        logger.info("turn %s: %s; asking again without tools", turn_id, err)
        return _stream(model, messages, [], session, turn_id, stop), []


def _answer_command(*, session: Session, command: MemoryCommand, result: TurnResult) -> None:
    """The user's own memory command (``/remember``, ``/forget``, ``/note``), carried out
    as the user without asking the model: stored as a model's call would be (the call, its
    result, a sentence saying what it did), so the thread reads the same whatever model is
    configured, and the fact it sets is the user's (the agent cannot overwrite it)."""
    if command.tool is None:
        text = command.usage
    else:
        arguments = json.dumps(command.arguments, ensure_ascii=False)
        call = ToolCall(id=f"command-{result.turn_id[:12]}", name=command.tool, arguments=arguments)
        call_message = _store(
            session, role=Message.Role.ASSISTANT, content="", tool_calls=_stored_calls([call])
        )
        tool_messages = dispatch_tool_calls(
            session=session, tool_calls=[call], actor=FactActor.USER
        )
        _note_stored(session, tool_messages)
        result.activity += [call_message, *tool_messages]
        text = describe_tool_result(call.name, arguments, tool_messages[0].content)
    flush_outbox()
    publish(session.pk, reply_delta(result.turn_id, text))
    result.reply = _store(
        session,
        role=Message.Role.ASSISTANT,
        content=text,
        memory_trace=memory_trace((), result.activity, command=True),
    )


def _stored_calls(tool_calls: Sequence[ToolCall]) -> list[dict]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in tool_calls
    ]


def _stream(
    model: ChatModel,
    messages: list[dict],
    tools: list[dict],
    session: Session,
    turn_id: str,
    stop: stops.StopSignal,
) -> Completion:
    """Stream one model answer to the clients, deltas coalesced, and return it complete;
    stopped by the user, what had streamed (the stream is closed, so the model stops)."""
    _give_back_connection()  # the turn's next query comes after the model's answer
    flush_outbox()  # what happened so far is shown before the model is asked
    sent: list[str] = []

    def send(text: str, *, hold: bool = False) -> None:  # each with the whole answer so far
        sent.append(text)
        publish(session.pk, reply_delta(turn_id, text, so_far="".join(sent)), hold=hold)

    deltas = DeltaBatcher(send, seconds=settings.STREAM_BATCH_SECONDS)
    streamed: list[str] = []
    if stop.requested():
        return Completion(content="", tool_calls=(), usage=None, model="")
    answer = model.stream(
        messages=messages,
        tools=tools or None,
        prompt_cache_key=session.prompt_cache_key,
        temperature=session.agent.temperature,
    )
    pump = Pump(answer, name=f"model-stream-{turn_id[:8]}")
    final = False  # the answer ended in words only: its reply is stored next
    try:
        for item in pump.items(every=stops.CHECK_SECONDS):
            if isinstance(item, Completion):
                final = not item.tool_calls
                return item
            if item:
                deltas.add(item)
                streamed.append(item)
            if stop.requested():
                return Completion(content="".join(streamed), tool_calls=(), usage=None, model="")
    except LLMError as err:
        if streamed and err.status is not None:
            # Once the answer began, a failure is final: asking again would show it twice.
            raise LLMError(str(err)) from err
        raise
    finally:
        if final and (last := deltas.take()):  # leaves with the turn's end, stored next
            send(last, hold=True)
        deltas.flush()  # what streamed is shown, even when the stream broke
        pump.abandon()  # a stopped stream's connection is closed: the model stops too
    raise LLMError("the model stream ended without an answer")


def _give_back_connection() -> None:
    """Return this thread's database connection to the process's pool while the turn
    waits on something else: the model, or Redis as the turn's end is published. With a
    model that takes seconds, a turn would otherwise hold a connection all that time, and
    the pool (``DATABASE_POOL_SIZE``) would bound how many turns run at once. Kept without
    a pool (connecting anew would cost more) and in a transaction."""
    if getattr(connection, "pool", None) is not None and not connection.in_atomic_block:
        connection.close()


NO_ANSWER_NOTICE = (
    "[The model gave no answer after its tool calls. The tool results are kept; send "
    "another message to continue.]"
)


def _reply_text(completion: Completion, *, after_tools: bool) -> str:
    """The reply to store: the model's words, or after tool calls that it followed with
    none (or with more calls, when it had no tools left), a notice saying so."""
    if completion.content.strip() or not (after_tools or completion.tool_calls):
        return completion.content
    return NO_ANSWER_NOTICE


def _fail(
    session: Session, result: TurnResult, *, failure: Literal["model", "internal"], text: str
) -> None:
    """Record why the turn ended and tell the clients; the user may retry."""
    result.failure = failure
    try:
        result.error = _store(session, role=Message.Role.ERROR, content=text)
    except Exception:  # the database itself may be what failed: still tell the clients
        logger.exception("could not store the error record of turn %s", result.turn_id)
    publish_on_commit(session.pk, turn_error(result.turn_id, text))


def _store(session: Session, **fields) -> Message:
    message = store_message(session=session, **fields)
    _note_stored(session, [message])
    return message


def _store_answer(session: Session, **fields) -> Message:
    """Store what the model answered, only while the session's user may still reach it:
    asked by the statement that stores it (``Session.append_message``'s ``reachable``),
    so the check costs no round trip of its own. AccessEnded, nothing stored, otherwise."""
    try:
        return _store(session, reachable=True, **fields)
    except SessionUnreachable as err:
        raise AccessEnded() from err


def _note_stored(session: Session, messages: list[Message]) -> None:
    """Tell the pipeline about each message just stored through ``session`` (it acts on
    every tenth conversation message, by the count the store left on the session)."""
    for message in messages:
        note_message_stored(session=session, message=message)


def _usage(completion: Completion) -> dict:
    usage = completion.usage
    return {
        "model_name": completion.model,
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "cached_tokens": usage.cached_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
    }


def _row(message: Message) -> dict:
    """A stored message as the window renders it, so this round's request shows the tool
    activity exactly as the next turn's context will."""
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": message.tool_calls,
        "tool_call_id": message.tool_call_id,
    }
