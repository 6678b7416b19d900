"""The channel layer keeps a burst of events whole (found by bench/chat_load.py).

channels-redis holds the pending events of every socket of one server process in one
Redis key, and silently drops what arrives while that key is full; with its default
capacity of 100, ten replies streaming at once lost their last deltas and turn.done.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from channels.layers import get_channel_layer

pytestmark = pytest.mark.redis

# Ten sockets of one server process, each receiving a reply of a hundred events at once.
BURST = 1_000


async def test_a_burst_of_events_for_one_server_process_arrives_whole():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = f"burst-{uuid.uuid4().hex}"
    await layer.group_add(group, channel)
    try:
        for number in range(BURST):
            await layer.group_send(group, {"type": "session.event", "number": number})
        received = [
            (await asyncio.wait_for(layer.receive(channel), timeout=5))["number"]
            for _ in range(BURST)
        ]
    finally:
        await layer.group_discard(group, channel)
    assert received == list(range(BURST))
