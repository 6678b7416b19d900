"""The Redis channel layer of the full setup: channels-redis's, reading the events of this
process's sockets many at a time, and sending from worker threads without the event loop.

channels-redis queues the events of every socket of one server process in one Redis key
and reads that key one event at a time, with four round trips each (put back what a
cancelled read left in the backup key, a blocking pop, a copy into the backup key, its
removal), one after another on the event loop. Under load the events waited seconds
in Redis: bench.chat_load found 360 of them queued behind one process.

Here, when events are waiting, one script takes up to ``RECEIVE_BATCH`` of them at once,
in order, keeping the same guarantee: they are copied to the backup key in the same
step, and the backup is emptied only once they are in this process's memory, so a read
cancelled half way loses nothing (the next read puts them back first). Only when nothing
is waiting does a read fall back to channels-redis's own blocking pop.

A turn runs in a worker thread and publishes its events from there. Through
``async_to_sync`` each publish waited for the event loop, which ran channels-redis's four
round trips for it between everything else it does: with two server processes the turn
threads spent 72 % of their time waiting so (py-spy). :meth:`RedisChannelLayer.group_send_blocking`
sends from the calling thread instead, with a synchronous Redis client, storing exactly what
channels-redis's ``group_send`` stores; memory/events.py uses it whenever the configured
layer has it (settings name the layer, nothing imports it).

Each of these costs one Redis command where it can (issue 43: a turn sent 26):

* a send is one script (``_GROUP_SEND_TO``) given the group's members as this process last
  saw them: it checks them against the group in Redis, in the same atomic step, and only
  then adds the event to each member's queue; a group whose members changed answers with
  its members, and the send is made again with them (channels-redis reads the members in
  one round trip and sends in a second, four commands in all). With several Redis hosts
  the members' queues may live elsewhere: then the two-step send.
* a read waits with one ``BZPOPMIN`` when nothing is waiting. channels-redis runs a script
  first (putting back its backup key) and, once an event came, copies it to the backup and
  deletes that again: four commands an event. The backup guards a read cancelled after the
  event left Redis and before it reached the caller; a blocking pop cancelled while its
  answer is in flight loses that event either way, and the consumer cancels its read only
  when the socket closes, whose events no one reads any more. The batched read above keeps
  the backup, since it takes many events at once.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time

import redis
from channels_redis import core

logger = logging.getLogger(__name__)

RECEIVE_BATCH = 100

# KEYS: the channel's queue, its backup. ARGV: how many to take. Puts back what the
# backup still holds (a read cancelled before its messages reached memory), then moves
# the oldest ARGV[1] messages to the backup and returns them, oldest first.
_TAKE_WAITING = """
local backed_up = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = #backed_up, 1, -2 do
    redis.call('ZADD', KEYS[1], backed_up[i], backed_up[i - 1])
end
redis.call('DEL', KEYS[2])
local taken = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local messages = {}
for i = 1, #taken, 2 do
    redis.call('ZADD', KEYS[2], taken[i + 1], taken[i])
    messages[#messages + 1] = taken[i]
end
if #messages > 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #messages - 1)
end
return messages
"""


# channels-redis's group_send script, as its ``group_send`` runs it: each channel's message
# is added unless the channel is at capacity. KEYS: channel keys; ARGV: their messages,
# their capacities, the time, the expiry.
_GROUP_SEND = """
local over_capacity = 0
local current_time = ARGV[#ARGV - 1]
local expiry = ARGV[#ARGV]
for i=1,#KEYS do
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + #KEYS]) then
        redis.call('ZADD', KEYS[i], current_time, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        over_capacity = over_capacity + 1
    end
end
return over_capacity
"""


# The whole of a group send, when the caller knows the group's members: KEYS[1] the group,
# KEYS[2..] the members' queues. ARGV: the group's expiry cut-off, how many members the
# caller knows, their names, then per queue its message and capacity, then the queues'
# expiry cut-off, the time and the expiry. Expires old members and old messages as
# channels-redis does; when the members in Redis are not those given, sends nothing and
# returns them (as a list after the word "members"); else the number of queues over
# capacity.
_GROUP_SEND_TO = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1])
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local known = tonumber(ARGV[2])
local same = #members == known
if same then
    local given = {}
    for i = 1, known do given[ARGV[2 + i]] = true end
    for _, name in ipairs(members) do
        if not given[name] then same = false break end
    end
end
if not same then
    table.insert(members, 1, 'members')
    return members
end
local queues = #KEYS - 1
local first = 2 + known
local cutoff, now, expiry = ARGV[#ARGV - 2], ARGV[#ARGV - 1], ARGV[#ARGV]
local over_capacity = 0
for i = 1, queues do
    local key = KEYS[i + 1]
    redis.call('ZREMRANGEBYSCORE', key, 0, cutoff)
    if redis.call('ZCOUNT', key, '-inf', '+inf') < tonumber(ARGV[first + queues + i]) then
        redis.call('ZADD', key, now, ARGV[first + i])
        redis.call('EXPIRE', key, expiry)
    else
        over_capacity = over_capacity + 1
    end
end
return over_capacity
"""

# How many groups' members a process remembers for its sends (a session's, a user's).
KNOWN_GROUPS = 4096


class RedisChannelLayer(core.RedisChannelLayer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, redis.Redis] = {}  # per host, for group_send_blocking
        self._clients_lock = threading.Lock()
        # The members of each group as this process's last send found them.
        self._members: collections.OrderedDict[str, list[str]] = collections.OrderedDict()
        self._members_lock = threading.Lock()
        # Messages of this process's channels taken from Redis and not yet handed out.
        self._taken: dict[str, collections.deque[bytes]] = collections.defaultdict(
            collections.deque
        )

    async def receive_single(self, channel: str) -> tuple[str, dict]:
        if "!" not in channel:  # a named channel shared by processes: as channels-redis
            return await super().receive_single(channel)
        if not self._taken[channel]:
            await self._take_waiting(channel)
        while not self._taken[channel]:  # nothing waiting: wait for one
            await self._wait_for_one(channel)
        return self._unpack(channel, self._taken[channel].popleft())

    async def _wait_for_one(self, channel: str) -> None:
        """One blocking pop of the channel's queue, up to channels-redis's timeout."""
        key = self.prefix + channel
        connection = self.connection(self.consistent_hash(channel))
        popped = await connection.bzpopmin(key, timeout=self.brpop_timeout)
        if popped is not None:
            self._taken[channel].append(popped[1])

    async def _take_waiting(self, channel: str) -> None:
        index = self.consistent_hash(channel)
        key = self.prefix + channel
        backup = self._backup_channel_name(key)
        connection = self.connection(index)
        await self.receive_clean_locks.acquire(key)
        try:
            taken = await connection.eval(_TAKE_WAITING, 2, key, backup, RECEIVE_BATCH)
        except BaseException:
            self.receive_clean_locks.release(key)
            raise
        if not taken:
            self.receive_clean_locks.release(key)
            return
        self._taken[channel].extend(taken)  # in memory now: the backup can go
        # Emptied in a task of its own, as channels-redis does, so that cancelling this
        # read cannot leave them in the backup to be delivered twice.
        cleaner = asyncio.ensure_future(connection.delete(backup))
        self.receive_cleaners.append(cleaner)

        def cleaned(task: asyncio.Future) -> None:
            self.receive_cleaners.remove(task)
            self.receive_clean_locks.release(key)

        cleaner.add_done_callback(cleaned)

    def _unpack(self, channel: str, content: bytes) -> tuple[str, dict]:
        """As channels-redis's ``receive_single`` ends: the message and the channel it is
        for (the full name a process-local channel's message carries)."""
        message = self.deserialize(content)
        return message.pop("__asgi_channel__", channel), message

    # --- sending from worker threads ---------------------------------------------------

    def group_send_blocking(self, group: str, message: dict) -> None:
        """channels-redis's ``group_send``, synchronous: the group's live members, then
        the message added to each member's queue (unless full), old messages expired. One
        script with one Redis host (the members this process last saw, checked there),
        else two round trips."""
        assert self.require_valid_group_name(group), "Group name not valid"
        if len(self.hosts) > 1:
            self._group_send_in_two_steps(group, message)
            return
        key = self._group_key(group)
        client = self._client(0)
        with self._members_lock:
            names = self._members.get(group, [])
        for _ in range(3):  # the members changed under the send: again with the new ones
            answer = self._send_to(client, key, names, message)
            if not isinstance(answer, list):
                break
            names = [name.decode("utf8") for name in answer[1:]]
        else:
            logger.warning("group %s changed three times during one send", group)
            self._group_send_in_two_steps(group, message)
            return
        with self._members_lock:
            self._members[group] = names
            self._members.move_to_end(group)
            if len(self._members) > KNOWN_GROUPS:
                self._members.popitem(last=False)
        if answer:
            logger.info("%s of %s channels over capacity in group %s", answer, len(names), group)

    def _send_to(self, client: redis.Redis, key: bytes, names: list[str], message: dict):
        """One run of ``_GROUP_SEND_TO``: the queues' over-capacity count, or the
        group's members when they are not ``names``."""
        by_connection, messages, capacities = self._map_channel_keys_to_connection(names, message)
        keys = [channel_key for keys in by_connection.values() for channel_key in keys]
        now = time.time()
        arguments = [int(now) - self.group_expiry, len(names), *names]
        arguments += [messages[k] for k in keys] + [capacities[k] for k in keys]
        arguments += [int(now) - int(self.expiry), now, self.expiry]
        return self._group_send_script(client)(keys=[key, *keys], args=arguments)

    def _group_send_script(self, client: redis.Redis):
        script = getattr(self, "_group_send_to", None)
        if script is None:  # sent by its digest (EVALSHA), its text only when Redis lacks it
            script = self._group_send_to = client.register_script(_GROUP_SEND_TO)
        return script

    def _group_send_in_two_steps(self, group: str, message: dict) -> None:
        key = self._group_key(group)
        members = self._client(self.consistent_hash(group)).pipeline(transaction=False)
        members.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
        members.zrange(key, 0, -1)
        names = [name.decode("utf8") for name in members.execute()[1]]
        by_connection, messages, capacities = self._map_channel_keys_to_connection(names, message)
        for index, keys in by_connection.items():
            send = self._client(index).pipeline(transaction=False)
            for channel_key in keys:
                send.zremrangebyscore(channel_key, min=0, max=int(time.time()) - int(self.expiry))
            args = [messages[k] for k in keys] + [capacities[k] for k in keys]
            send.eval(_GROUP_SEND, len(keys), *keys, *args, time.time(), self.expiry)
            over_capacity = send.execute()[-1]
            if over_capacity:
                logger.info(
                    "%s of %s channels over capacity in group %s", over_capacity, len(names), group
                )

    def _client(self, index: int) -> redis.Redis:
        with self._clients_lock:
            if index not in self._clients:
                host = dict(self.hosts[index])
                address = host.pop("address", None)
                self._clients[index] = (
                    redis.Redis.from_url(address, **host) if address else redis.Redis(**host)
                )
            return self._clients[index]
