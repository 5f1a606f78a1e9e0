"""Flow control: the bandwidth cap and the bound on bytes in flight.

:class:`TokenBucket` is sans-IO (time is an argument); the mirror sleeps the
delay it returns. :class:`ByteBudget` bounds the bytes fetched from the source
and not yet acknowledged by the aggregate: when the aggregate is slow the
budget fills and fetching waits, so memory stays bounded however long the
link stalls.
"""

from __future__ import annotations

import trio


class TokenBucket:
    """``rate`` bytes per second on average, in bursts of up to ``burst`` bytes.

    Taking more than is available is allowed and runs the bucket into debt;
    the returned delay is how long to wait for the debt to be paid, so a large
    fetch is never refused, only followed by a proportionate pause."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("rate and burst must be positive")
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.updated = now

    def take(self, amount: int, now: float) -> float:
        """Take ``amount`` tokens at time ``now``; seconds to wait before going on."""
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        self.tokens -= amount
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


class Throttle:
    """A :class:`TokenBucket` on trio's clock; no-op without a rate."""

    def __init__(self, rate: int | None) -> None:
        self._bucket = None if rate is None else TokenBucket(rate, max(rate / 10, 64 * 1024), trio.current_time())

    async def consumed(self, amount: int) -> None:
        if self._bucket is None:
            return
        delay = self._bucket.take(amount, trio.current_time())
        if delay > 0:
            await trio.sleep(delay)


class ByteBudget:
    """At most ``limit`` bytes reserved at once; one reservation may exceed it
    when nothing else is reserved, so an oversized batch still moves."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._released = trio.Event()

    async def acquire(self, amount: int) -> None:
        while self.used > 0 and self.used + amount > self.limit:
            await self._released.wait()
        self.used += amount

    def take(self, amount: int) -> None:
        """Count ``amount`` bytes already in hand, without waiting: what a fetch brought in
        is held whatever the budget says (the wait is before the fetch, in :meth:`acquire`)."""
        self.used += amount

    def release(self, amount: int) -> None:
        if amount <= 0:
            return
        self.used -= amount
        assert self.used >= 0, "released more than was acquired"
        self._released.set()
        self._released = trio.Event()


__all__ = ["ByteBudget", "Throttle", "TokenBucket"]
