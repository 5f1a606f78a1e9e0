"""Buffers that large responses are received into, used again once nothing refers to them.

A fresh buffer costs more than its bytes: the kernel maps and zeroes every page on first
touch, and Python zeroes it once more. On this project's 2-core VM, inside the mirror, a fresh
8 MB buffer per Fetch response cost 6 ms, a third of the mirror's CPU per GB with 1 MiB
batches (docs/benchmarks.md). The connections of a ``Cluster``, which receive large writable
responses straight into buffers (``BrokerConnection.exchange``), share one pool of them.

A response is handed out as a ``memoryview`` of a pooled buffer, and that buffer is free again
exactly when the last view of it is gone: every view and every slice of a view keeps the
buffer referenced, and the pool hands out nothing else, so CPython's reference count of the
buffer says whether anyone still holds its bytes. A free buffer is reused without being zeroed
(the response is received over it). Not thread-safe: one cluster, one Trio run.
"""

from __future__ import annotations

import sys


def _unused_count() -> int:
    """What ``sys.getrefcount`` says of a buffer that only the pool's list refers to (the
    list's reference and the call's own), measured the way :meth:`ReceiveBuffers.take` asks."""
    buffers = [bytearray(1)]
    return sys.getrefcount(buffers[0])


_UNUSED = _unused_count()
#: Buffers are allocated in whole steps of this, so that a slightly larger response fits too.
_STEP = 256 * 1024


class ReceiveBuffers:
    """At most ``max_buffers`` buffers of at most ``max_bytes`` together; a response larger
    than fits, or arriving while every pooled buffer is in use and the pool is full, gets a
    buffer of its own that is not kept."""

    __slots__ = ("_buffers", "_largest", "_pooled", "max_buffers", "max_bytes")

    def __init__(self, *, max_buffers: int = 16, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._buffers: list[bytearray] = []
        self._pooled = 0
        self._largest = 0
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes

    @property
    def pooled_bytes(self) -> int:
        """The capacity of the buffers kept, in use or not."""
        return self._pooled

    def take(self, size: int) -> memoryview:
        """A writable view of ``size`` bytes (contents undefined): of the smallest free pooled
        buffer that holds it, else of a new one, kept if the pool has room for it."""
        buffers = self._buffers
        best = -1
        for index in range(len(buffers)):
            # No local name for the buffer: it would count as a reference.
            capacity = len(buffers[index])
            if (
                capacity >= size
                and (best < 0 or capacity < len(buffers[best]))
                and sys.getrefcount(buffers[index]) == _UNUSED
            ):
                best = index
        if best >= 0:
            return memoryview(buffers[best])[:size]
        # As large as the largest response so far: responses vary in size (a fetch's partitions
        # hold more or less), and a buffer that fits only the smaller ones would be dropped for
        # a fresh one whenever a larger response came.
        capacity = max(-(-size // _STEP) * _STEP, self._largest)
        self._largest = capacity
        fresh = bytearray(capacity)
        self._make_room(capacity)
        if len(buffers) < self.max_buffers and self._pooled + capacity <= self.max_bytes:
            buffers.append(fresh)
            self._pooled += capacity
        return memoryview(fresh)[:size]

    def _make_room(self, capacity: int) -> None:
        """Drop free buffers, smallest first, until one of ``capacity`` would fit (a pool of
        small buffers must not stop larger responses from being pooled)."""
        buffers = self._buffers
        while len(buffers) >= self.max_buffers or self._pooled + capacity > self.max_bytes:
            free = [i for i in range(len(buffers)) if sys.getrefcount(buffers[i]) == _UNUSED]
            if not free or capacity > self.max_bytes:
                return
            smallest = min(free, key=lambda i: len(buffers[i]))
            self._pooled -= len(buffers[smallest])
            del buffers[smallest]


__all__ = ["ReceiveBuffers"]
