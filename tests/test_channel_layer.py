"""The channel layer keeps a burst of events whole (found by bench.chat_load), reads
them many at a time and sends them from worker threads (driftless/channel_layer.py).

channels-redis holds the pending events of every socket of one server process in one
Redis key, and silently drops what arrives while that key is full; with its default
capacity of 100, ten replies streaming at once lost their last deltas and turn.done.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from channels.layers import get_channel_layer
from channels_redis import core
from django.conf import settings

from driftless.channel_layer import _TAKE_WAITING
from memory.infra.channels import group_send

pytestmark = pytest.mark.redis

# Ten sockets of one server process, each receiving a reply of a hundred events at once.
BURST = 1_000


async def test_a_burst_of_events_for_one_server_process_arrives_whole():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = f"burst-{uuid.uuid4().hex}"
    await layer.group_add(group, channel)
    try:

        def send_all() -> None:  # as a turn publishes: from its worker thread
            for number in range(BURST):
                group_send(group, {"type": "session.event", "number": number})

        await asyncio.to_thread(send_all)
        received = [
            (await asyncio.wait_for(layer.receive(channel), timeout=5))["number"]
            for _ in range(BURST)
        ]
    finally:
        await layer.group_discard(group, channel)
    assert received == list(range(BURST))


# --- driftless/channel_layer.py: many events per read, sent from threads -----------------


def plain_channels_redis_layer() -> core.RedisChannelLayer:
    """channels-redis's own layer on the same Redis and prefix."""
    return core.RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])


async def receive_all(layer, channel: str, count: int) -> list[int]:
    return [
        (await asyncio.wait_for(layer.receive(channel), timeout=5))["number"] for _ in range(count)
    ]


async def test_events_sent_from_a_thread_reach_a_socket_of_channels_redis_itself():
    assert hasattr(get_channel_layer(), "group_send_blocking")  # the layer settings name
    receiver = plain_channels_redis_layer()
    channel = await receiver.new_channel()
    group = f"thread-{uuid.uuid4().hex}"
    await receiver.group_add(group, channel)
    try:

        def send_all() -> None:
            for number in range(50):
                group_send(group, {"type": "session.event", "number": number})

        await asyncio.to_thread(send_all)
        received = await receive_all(receiver, channel, 50)
    finally:
        await receiver.group_discard(group, channel)
    assert received == list(range(50))


async def test_two_sockets_of_one_process_each_get_their_own_events_in_order():
    layer = get_channel_layer()
    first, second = await layer.new_channel(), await layer.new_channel()
    for number in range(300):  # interleaved, more than one read takes at once
        await layer.send(first if number % 2 else second, {"type": "e", "number": number})
    odd, even = await asyncio.gather(
        receive_all(layer, first, 150), receive_all(layer, second, 150)
    )
    assert (odd, even) == (list(range(1, 300, 2)), list(range(0, 300, 2)))


async def test_events_a_cancelled_read_had_taken_are_delivered_once():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    for number in range(5):
        await layer.send(channel, {"type": "e", "number": number})
    # A read whose script ran in Redis but whose answer never arrived (it was cancelled):
    # the events sit in the backup key only.
    real = layer.non_local_name(channel)
    key = layer.prefix + real
    connection = layer.connection(layer.consistent_hash(real))
    taken = await connection.eval(_TAKE_WAITING, 2, key, layer._backup_channel_name(key), 3)
    assert len(taken) == 3

    received = await receive_all(layer, channel, 5)

    assert received == [0, 1, 2, 3, 4]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=0.5)


# --- one command a send, one a read (issue 43) ----------------------------------------------


async def test_a_send_reaches_a_member_that_joined_after_the_last_send_and_not_one_that_left():
    layer = get_channel_layer()
    first, second = await layer.new_channel(), await layer.new_channel()
    group = f"members-{uuid.uuid4().hex}"
    await layer.group_add(group, first)
    try:
        await asyncio.to_thread(group_send, group, {"type": "e", "number": 1})
        await layer.group_add(group, second)  # the sender's known members are stale now
        await asyncio.to_thread(group_send, group, {"type": "e", "number": 2})
        await layer.group_discard(group, first)
        await asyncio.to_thread(group_send, group, {"type": "e", "number": 3})
        assert await receive_all(layer, first, 2) == [1, 2]
        assert await receive_all(layer, second, 2) == [2, 3]
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(layer.receive(first), timeout=0.3)
    finally:
        await layer.group_discard(group, second)


async def test_a_send_to_known_members_is_one_redis_command_and_a_waiting_read_one():
    from bench.counting import Counted

    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = f"count-{uuid.uuid4().hex}"
    await layer.group_add(group, channel)
    try:
        await asyncio.to_thread(group_send, group, {"type": "e", "number": 0})  # learns them
        assert await receive_all(layer, channel, 1) == [0]
        reading = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0.2)  # the read waits in Redis now
        with Counted() as counted:
            await asyncio.to_thread(group_send, group, {"type": "e", "number": 1})
            assert (await asyncio.wait_for(reading, timeout=5))["number"] == 1
        assert counted.redis == 1  # the send; the read's pop was sent before
    finally:
        await layer.group_discard(group, channel)
