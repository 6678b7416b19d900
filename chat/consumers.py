"""The websocket of one session: ``ws/sessions/<id>/`` (protocol in docs/websocket.md).

The consumer is an interface and stays thin: it checks that the caller may reach the
session (``Session.objects.owned_by``: their own, while a member and active) when the
socket opens, again before every frame, and when the account changes (chat/accounts.py),
closing the socket once access has ended; it parses each frame (chat/protocol.py), hands
the work to one domain function in a worker thread, and forwards the session's events
(memory/events.py) as JSON frames. The work runs off the event loop so the socket keeps
receiving (and refusing a second send) while a reply streams; events reach every tab of
the session through the channel-layer group.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import close_old_connections
from django.utils.module_loading import import_string

from chat.accounts import live_user, user_group
from chat.protocol import (
    CancelTurn,
    ClientFrame,
    EditMessage,
    NewTopic,
    RegenerateTurn,
    RetryTurn,
    SendMessage,
    parse_frame,
)
from memory.actions.scheduling import request_exit_evaluation
from memory.actions.topics import do_new_topic
from memory.actions.turn import (
    do_edit_turn,
    do_regenerate_turn,
    do_retry_turn,
    do_send_message,
    do_stop_turn,
)
from memory.events import error_event
from memory.infra.channels import channel_layer_answered, missed_deliveries, session_group
from memory.lib.errors import Refused, log_error, public_failure
from memory.models import Session

logger = logging.getLogger(__name__)

# Turns mostly wait on the model, so more threads than cores is right; each one holds a
# database connection while it works (borrowed from the process's pool, DATABASE_POOL_SIZE),
# which bounds this by the database's connections divided by the server processes.
TURN_WORKERS = 32
_turn_executor = ThreadPoolExecutor(max_workers=TURN_WORKERS, thread_name_prefix="turn")

# Close codes when the handshake is refused.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
# The channel layer (Redis) failed: the client should reconnect a little later. 1013
# (try again later) in the application's range: daphne, which `make run` serves with,
# refuses 1013 from an application (only 1000 and 3000-4999), so the consumer raised
# and the client got a bare 1011.
CLOSE_TRY_AGAIN_LATER = 4013
EVENTS_UNAVAILABLE_MESSAGE = (
    "live updates are unavailable for a moment; what you sent is kept, reconnecting"
)
# Joining the group is tried this often: the first call after Redis came back may meet
# a connection the pool still holds from before the outage. All attempts together take
# at most GROUP_JOIN_SECONDS: against a dead Redis each call retries for seconds, and
# daphne drops a handshake not answered within 5 s with no reason at all.
GROUP_JOIN_ATTEMPTS = 3
GROUP_JOIN_SECONDS = 2.0


class CloseSocket(Exception):
    """The caller may no longer reach the session (logged out, deactivated, password
    changed, or no longer a member of its organization): close with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _reachable_session(session_key: str | None, session_id: int) -> Session:
    """The session, read afresh for the user the login session names now; CloseSocket
    with the close code otherwise."""
    store = import_string(f"{settings.SESSION_ENGINE}.SessionStore")(session_key)
    user = live_user(store) if session_key else None
    if user is None:
        raise CloseSocket(CLOSE_UNAUTHENTICATED)
    session = (
        Session.objects.owned_by(user).select_related("agent", "user").filter(pk=session_id).first()
    )
    if session is None:
        raise CloseSocket(CLOSE_FORBIDDEN)
    return session


def _check_access(session_key: str | None, session_id: int) -> None:
    _reachable_session(session_key, session_id)


def _frame_session(user_id: int, session_id: int) -> Session:
    """The session a frame acts on, read afresh in one query, while the user the socket
    was opened for may still reach it (``Session.objects.owned_by``'s rule). The login is
    not checked again per frame: it was checked when the socket opened, and a logout, a
    password change or a deactivation closes the socket (``account_changed``)."""
    session = (
        Session.objects.filter(
            pk=session_id, user_id=user_id, user__is_active=True, organization__members=user_id
        )
        .select_related("agent", "user")
        .first()
    )
    if session is None:
        raise CloseSocket(CLOSE_FORBIDDEN)
    return session


def _act(user_id: int, login: str | None, session_id: int, frame: ClientFrame) -> None:
    """Run one client request to the end, in a worker thread; ``login``, when given, is
    the login session to check again first (see ``SOCKET_LOGIN_RECHECK_SECONDS``)."""
    try:
        if login is not None:
            session = _reachable_session(login, session_id)
        else:
            session = _frame_session(user_id, session_id)
        if isinstance(frame, SendMessage):
            do_send_message(session=session, content=frame.content)
        elif isinstance(frame, RetryTurn):
            do_retry_turn(session=session)
        elif isinstance(frame, EditMessage):
            do_edit_turn(session=session, message_id=frame.message_id, content=frame.content)
        elif isinstance(frame, RegenerateTurn):
            do_regenerate_turn(session=session)
        elif isinstance(frame, NewTopic):
            do_new_topic(session=session)
        elif isinstance(frame, CancelTurn):
            do_stop_turn(session=session)
    finally:
        # Worker threads are pooled: their connection goes back to the process's database
        # pool (PostgreSQL), or stays open up to CONN_MAX_AGE; a broken one is closed.
        close_old_connections()


class SessionConsumer(AsyncWebsocketConsumer):
    session_id: int | None = None
    session_key: str | None = None  # the login session the socket was opened with
    user_id: int | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Requests in flight, referenced so the event loop cannot drop them. Whether a
        # turn may start is the session lock's call (memory/actions/turn.py), across tabs and
        # processes; a refused request answers with a turn_in_progress error.
        self._work: set[asyncio.Task] = set()
        self._layer_receive = None
        self._layer_failed = False
        self._closing = False
        self._joined_at: float | None = None  # when it joined its groups (wall clock)
        self._login_checked = time.monotonic()  # when the socket opened

    # Channels reads the session's events through ``self.channel_receive``; a failure
    # there would end the consumer with a bare 1011. It is wrapped so a failed channel
    # layer becomes one ``channel.failed`` message, handled below.
    @property
    def channel_receive(self):
        return self._receive_from_layer

    @channel_receive.setter
    def channel_receive(self, receive) -> None:
        self._layer_receive = receive

    async def _receive_from_layer(self) -> dict:
        if not self._layer_failed:
            try:
                return await self._layer_receive()
            except Exception as err:
                logger.warning("channel layer failed for session %s: %r", self.session_id, err)
                self._layer_failed = True
                return {"type": "channel.failed"}
        await asyncio.Event().wait()  # nothing more from the layer; the socket is closing

    async def channel_failed(self, message: dict) -> None:
        """Say why, then close: the client reconnects and re-syncs from the database.
        Requests already accepted run to the end in their threads and are stored."""
        if self._closing:
            return
        self._closing = True
        await self._send_error("events_unavailable", EVENTS_UNAVAILABLE_MESSAGE)
        await self.close(code=CLOSE_TRY_AGAIN_LATER)

    async def dispatch(self, message: dict) -> None:
        """Channels' own dispatch, without the thread hop it takes before every message
        to close the event loop thread's stale database connections: this consumer never
        touches the database on the event loop. Its handlers reach it only through
        ``database_sync_to_async``, which closes stale connections in its own thread
        around each call. Every delivery of a turn's events paid that hop (about 3 ms of
        a turn's CPU on the event loop, bench.chat_load)."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        user = self.scope.get("user")
        session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.session_key = self.scope["session"].session_key
        try:
            await database_sync_to_async(_check_access)(self.session_key, session_id)
        except CloseSocket as ended:
            await self.close(code=ended.code)  # not found and not yours look the same
            return
        self.session_id = session_id
        self.user_id = user.pk
        joined = await self._join_group()
        await self.accept()
        if not joined:
            await self.channel_failed({})

    async def _join_group(self) -> bool:
        """Join the session's and the user's groups; False when the layer is down. Joined,
        the layer has answered: this process publishes to it again at once."""
        groups = (session_group(self.session_id), user_group(self.user_id))
        try:
            async with asyncio.timeout(GROUP_JOIN_SECONDS):
                for attempt in range(GROUP_JOIN_ATTEMPTS):
                    try:
                        for group in groups:
                            await self.channel_layer.group_add(group, self.channel_name)
                        self._joined_at = time.time()
                        channel_layer_answered()
                        return True
                    except Exception as err:
                        logger.warning(
                            "could not join the events of session %s: %r", self.session_id, err
                        )
                        await asyncio.sleep(0.1 * attempt)
        except TimeoutError:
            logger.warning("could not join the events of session %s in time", self.session_id)
        self._layer_failed = True
        return False

    async def disconnect(self, code: int) -> None:
        if self.session_id is None:
            return
        for group in (session_group(self.session_id), user_group(self.user_id)):
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # a dead layer forgets the group by itself (group expiry)
                logger.debug("could not leave %s", group)
        # A running turn is left to finish: its reply is stored for the next visit. Not in
        # the thread the sockets' access checks share: with the broker down, enqueueing
        # blocks for seconds, and a socket opening meanwhile missed daphne's 5 s handshake.
        schedule = database_sync_to_async(request_exit_evaluation, thread_sensitive=False)
        await schedule(session_id=self.session_id)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        try:
            frame = parse_frame(text_data, binary=bytes_data is not None)
        except Refused as refused:
            await self._send_error(refused.code, refused.message)
            return
        task = asyncio.create_task(self._perform(frame))
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    async def _perform(self, frame: ClientFrame) -> None:
        work = database_sync_to_async(_act, thread_sensitive=False, executor=_turn_executor)
        missed = missed_deliveries(self.session_id)
        try:
            login = None
            now = time.monotonic()
            if now - self._login_checked >= settings.SOCKET_LOGIN_RECHECK_SECONDS:
                login, self._login_checked = self.session_key, now
            await work(self.user_id, login, self.session_id, frame)
            if missed_deliveries(self.session_id) != missed:
                # Some of the session's events never reached the channel layer (memory/
                # events.py): this socket has not shown them. Say so and close; the page
                # reconnects and re-syncs what was stored.
                await self.channel_failed({})
        except CloseSocket as ended:
            await self.close(code=ended.code)
        except Refused as refused:  # mapped once: the same code REST answers
            await self._send_error(refused.code, refused.message)
        except Exception as err:
            error_id = log_error(
                "websocket request failed in session %s", self.session_id, exc_info=err
            )
            await self._send_error(
                "internal_error", public_failure("the request failed; try again", error_id)
            )

    async def account_changed(self, message: dict) -> None:
        """The account changed (chat/accounts.py): close if access has ended. A logout
        names its login session: that one's sockets close without asking."""
        logged_out = message.get("session_key")
        if logged_out is not None:
            if logged_out == self.session_key:
                await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            await database_sync_to_async(_check_access)(self.session_key, self.session_id)
        except CloseSocket as ended:
            await self.close(code=ended.code)

    async def session_events(self, message: dict) -> None:
        """Events published to the session's group (memory/events.py): forwarded unchanged,
        in order, one frame each. A deleted session's sockets are closed once they have
        been told."""
        for event in message["events"]:
            await self.send(text_data=json.dumps(event))
            if event["type"] == "session.deleted":
                await self.close(code=CLOSE_FORBIDDEN)
                return

    async def session_missed(self, message: dict) -> None:
        """Events of the session could not be delivered (memory/events.py, told once the
        layer answers again): if this socket was there to miss them, say so and close;
        the page reconnects and re-syncs. One that joined later showed nothing stale."""
        if self._joined_at is not None and self._joined_at <= message["until"]:
            await self.channel_failed({})

    async def _send_error(self, code: str, text: str) -> None:
        await self.send(text_data=json.dumps(error_event(code, text)))
