"""Where the consumer's rebalance callbacks run: only while the application is in poll.

Kafka's consumer runs ``onPartitionsRevoked`` and ``onPartitionsAssigned``
inside ``poll()``, so a callback never runs while the application is still
working on records that poll returned: ``on_revoke`` can commit what was
processed, knowing nothing else is in flight. Here group membership runs in a
background task, so that heartbeats go on while the application works; this
gate keeps Kafka's guarantee. The membership task :meth:`PollGate.hold`\\ s the
gate around its callbacks: that waits until the application is inside
``poll`` (or asks ``async for`` for its next record), and while the gate is
held, poll hands out nothing.

The gate also tells how long the application has stayed away from poll, for
``max_poll_interval_ms``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


class PollGate:
    def __init__(self) -> None:
        self._inside = 0
        self._held = False
        self._changed = trio.Event()
        #: True while a hold waits for the application: ``async for`` then
        #: leaves its per-record fast path to let it in.
        self.wanted = False
        #: Poll points passed (``async for`` counts each record): a cheap sign of life.
        self.polls = 0
        self._left_at: float | None = None  # set at the first check: made before trio runs
        self._seen_polls = 0
        self._seen_at = -math.inf
        #: Set when the consumer closes: holds no longer wait for a poll.
        self.open = False

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # --- the application's side ----------------------------------------------------------------

    def enter(self) -> None:
        self._inside += 1
        self.polls += 1
        self._notify()

    def leave(self) -> None:
        self._inside -= 1
        self._left_at = trio.current_time()

    @property
    def held(self) -> bool:
        return self._held

    async def wait_released(self) -> None:
        while self._held:
            await self._changed.wait()

    def away_for(self) -> float:
        """Seconds since the application last was in poll (0 while it is)."""
        if self._inside:
            return 0.0
        now = trio.current_time()
        if self._left_at is None:
            self._left_at = now
        if self.polls != self._seen_polls:
            self._seen_polls, self._seen_at = self.polls, now
        return now - max(self._seen_at, self._left_at)

    async def wait_for_poll(self) -> None:
        while not self._inside and not self.open:
            await self._changed.wait()

    # --- the membership task's side ------------------------------------------------------------

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Wait for the application to be in poll, and keep poll from handing out
        records until the block ends."""
        self.wanted = True
        try:
            await self.wait_for_poll()
        finally:
            self.wanted = False
        self._held = True
        try:
            yield
        finally:
            self._held = False
            self._notify()


__all__ = ["PollGate"]
