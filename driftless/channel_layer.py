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
sends from the calling thread instead, with a synchronous Redis client, in two round trips
that store exactly what channels-redis's ``group_send`` stores; memory/events.py uses it
whenever the configured layer has it (settings name the layer, nothing imports it).
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


class RedisChannelLayer(core.RedisChannelLayer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, redis.Redis] = {}  # per host, for group_send_blocking
        self._clients_lock = threading.Lock()
        # Messages of this process's channels taken from Redis and not yet handed out.
        self._taken: dict[str, collections.deque[bytes]] = collections.defaultdict(
            collections.deque
        )

    async def receive_single(self, channel: str) -> tuple[str, dict]:
        if "!" not in channel:  # a named channel shared by processes: as channels-redis
            return await super().receive_single(channel)
        if not self._taken[channel]:
            await self._take_waiting(channel)
        if not self._taken[channel]:
            return await super().receive_single(channel)  # nothing waiting: wait for one
        return self._unpack(channel, self._taken[channel].popleft())

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
        the message added to each member's queue (unless full), old messages expired."""
        assert self.require_valid_group_name(group), "Group name not valid"
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
