"""The broker-wide budget of request bytes read but not yet answered (``queued.max.request.bytes``).

A connection takes a frame's size from the budget as soon as the frame's length
prefix is read, before its body is, and gives it back once the response has been
written. When the budget is spent, connections stop reading (Kafka mutes their
channels) until responses free some: memory is bounded however many clients
pipeline large requests, and the bytes not read wait in the kernel's socket
buffers, where TCP flow control pushes back on the client.

Two rules keep this from deadlocking. A frame's whole size is taken at once:
were it taken piecemeal while the body arrives, two half-read frames could hold
the budget between them, each waiting for the other. And waiters are served
first come, first served: a large frame at the head is not overtaken by a
stream of small ones forever.

One connection may not take it all. While it holds anything, it may hold at
most a share of the budget (a quarter); past that it waits for its own
responses to be written, not in the queue everyone shares. Otherwise a client
pipelining large requests behind one that waits (a long-polling Fetch, a
JoinGroup) would hold the budget, and stall every other client, for as long
as that request waits. Its next request, once it holds nothing, may be as
large as the whole budget.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import trio


@dataclass(slots=True, eq=False)
class _Waiter:
    size: int
    granted: bool = False
    event: trio.Event = field(default_factory=trio.Event)


#: What one connection may hold of the budget while it holds anything: 1/SHARE of it.
SHARE = 4


class RequestBudget:
    """A byte semaphore with first-come-first-served waiters; ``capacity=None`` is unlimited
    (every acquire succeeds at once, and ``used`` is still counted, for the metrics)."""

    __slots__ = ("_waiters", "capacity", "held_back", "share", "used")

    def __init__(self, capacity: int | None) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"a request budget needs a positive capacity, got {capacity}")
        self.capacity = capacity
        self.share = None if capacity is None else max(capacity // SHARE, 1)
        self.used = 0
        # Connections waiting for their own responses before they may take more (see BudgetLease).
        self.held_back = 0
        self._waiters: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        """Acquires waiting for bytes to be released: connections not being read now."""
        return len(self._waiters)

    @property
    def throttled(self) -> int:
        """Connections not being read because of the budget, for either reason."""
        return len(self._waiters) + self.held_back

    def fits(self, size: int) -> bool:
        """Whether ``size`` bytes could ever be granted: a frame larger than the whole
        budget could not, and is refused."""
        return self.capacity is None or size <= self.capacity

    async def acquire(self, size: int) -> None:
        """Take ``size`` bytes, waiting behind earlier waiters until they are free;
        cancelled while waiting, it takes nothing.

        Granted at once, it returns without a checkpoint (unlike trio's own primitives):
        the reader calls it for every frame, between a receive and a send that are
        checkpoints already, and two more trips through the scheduler per request cost
        more than the rest of the accounting."""
        if not self.fits(size):
            raise ValueError(f"{size} bytes exceed the whole budget of {self.capacity}")
        if not self._waiters and self._free(size):
            self.used += size
            return
        waiter = _Waiter(size)
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:  # granted as the cancellation arrived: give it back
                self.release(size)
            else:
                self._waiters.remove(waiter)
                self._grant()  # it may have been the head that held the others up
            raise

    def try_acquire(self, size: int) -> bool:
        """Take ``size`` bytes if they are free now and nobody waits; False (nothing taken) else."""
        if self._waiters or not self.fits(size) or not self._free(size):
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        if not 0 <= size <= self.used:
            raise ValueError(f"releasing {size} bytes of a budget with {self.used} in use")
        self.used -= size
        self._grant()

    def _free(self, size: int) -> bool:
        return self.capacity is None or self.used + size <= self.capacity

    def _grant(self) -> None:
        while self._waiters and self._free(self._waiters[0].size):
            waiter = self._waiters.popleft()
            self.used += waiter.size
            waiter.granted = True
            waiter.event.set()


class BudgetLease:
    """What one connection holds of the budget.

    It takes the budget's ``share`` at most while it holds anything (see the module's
    docstring). Whatever way the connection ends (a request queued but never handled,
    a response never written, a frame half read), :meth:`release_all` gives back
    everything it still holds, so no path leaks bytes."""

    __slots__ = ("_budget", "_released", "held")

    def __init__(self, budget: RequestBudget) -> None:
        self._budget = budget
        self._released = trio.Event()
        self.held = 0

    @property
    def budget(self) -> RequestBudget:
        return self._budget

    def _over_share(self, size: int) -> bool:
        share = self._budget.share
        return self.held > 0 and share is not None and self.held + size > share

    async def acquire(self, size: int) -> None:
        if self._over_share(size):
            self._budget.held_back += 1
            try:
                while self._over_share(size):
                    self._released = trio.Event()
                    await self._released.wait()
            finally:
                self._budget.held_back -= 1
        await self._budget.acquire(size)
        self.held += size

    def try_acquire(self, size: int) -> bool:
        """:meth:`acquire` when it would not wait: True once taken, False (nothing taken) when
        the connection's share or the budget is spent."""
        if self._over_share(size) or not self._budget.try_acquire(size):
            return False
        self.held += size
        return True

    def release(self, size: int) -> None:
        # Never more than is held: a callback that runs after release_all gives back nothing.
        size = min(size, self.held)
        self.held -= size
        self._budget.release(size)
        self._released.set()

    def release_all(self) -> None:
        self.release(self.held)
