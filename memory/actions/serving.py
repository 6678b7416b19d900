"""What an ASGI server process asks of the domain: start the periodic sweep, and shut
down gracefully (refuse new turns, wait for the ones in flight, mark what is left as
interrupted). driftless/serve.py and driftless/multiserve.py call these and nothing
deeper: the leases and the sweep stay the domain's.
"""

from __future__ import annotations

from memory.actions.scheduling import start_sweeper
from memory.stores.leases import (
    TURN_LEASE_PREFIX,
    held_by_this_process,
    interrupt_running_turns,
    stop_accepting_turns,
)

__all__ = [
    "interrupt_running_turns",
    "start_sweeper",
    "stop_accepting_turns",
    "turns_in_flight",
]


def turns_in_flight() -> bool:
    """Whether this process still runs a turn (holds a turn lease)."""
    return bool(held_by_this_process(TURN_LEASE_PREFIX))
