"""Deadlines keyed by what they are for, as the state machine's purgatory.

Scheduling a key again replaces its deadline, and cancelling forgets it, so
a heartbeat simply pushes its member's expiry forward. The heap keeps stale
entries until they surface (lazy deletion): cheaper than searching it, and
each key has at most one live entry.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable


class TimerQueue:
    def __init__(self) -> None:
        self._deadlines: dict[Hashable, tuple[int, int]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._deadlines)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadlines

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        entry = (deadline_ms, next(self._seq))
        self._deadlines[key] = entry
        heapq.heappush(self._heap, (*entry, key))

    def cancel(self, key: Hashable) -> None:
        self._deadlines.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        entry = self._deadlines.get(key)
        return None if entry is None else entry[0]

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Hashable | None:
        """The key of the earliest deadline at or before ``now_ms``, now forgotten; or None."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._deadlines[key]
        return key

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            if self._deadlines.get(key) == (deadline, seq):
                return
            heapq.heappop(heap)
