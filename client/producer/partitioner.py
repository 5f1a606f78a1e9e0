"""Which partition a record goes to, sans-IO.

- A record with a key goes where :func:`protocol.murmur2.partition_for_key`
  says, over *all* the topic's partitions (available or not), as Kafka's Java
  client and librdkafka's ``murmur2_random`` do: the same key lands on the same
  partition whichever client wrote it, and keeps landing there while its
  leader is away (records wait rather than move).
- A record without a key goes to the topic's *sticky* partition (KIP-480):
  one partition collects null-key records until its batch is closed (full, or
  sent after ``linger_ms``); the next null-key record then picks another
  partition at random among those with a leader. Batches fill up instead of
  each partition getting a trickle, which is what makes null-key sends cheap.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from tributary.protocol.murmur2 import partition_for_key
from tributary.protocol.records import Payload

#: Keys whose partitions a topic remembers: murmur2 in Python costs about a
#: microsecond per short key, a dict lookup a twentieth of that, and keys (user
#: ids, hosts) repeat. The memo is dropped whole when full.
KEY_MEMO_SIZE = 65_536


class KeyedPartitioner:
    """murmur2 partitions of one topic's keys, memoised for ``bytes`` keys."""

    __slots__ = ("_count", "_memo")

    def __init__(self, partition_count: int) -> None:
        self._count = partition_count
        self._memo: dict[bytes, int] = {}

    def resize(self, partition_count: int) -> None:
        if partition_count != self._count:
            self._count = partition_count
            self._memo = {}

    def partition(self, key: Payload) -> int:
        memo = self._memo
        if type(key) is bytes:
            found = memo.get(key)
            if found is not None:
                return found
            if len(memo) >= KEY_MEMO_SIZE:
                memo = self._memo = {}
            found = memo[key] = partition_for_key(key, self._count)
            return found
        return partition_for_key(key, self._count)


class StickyPartitioner:
    """The sticky partition of one topic."""

    __slots__ = ("_random", "current")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._random = rng or random.Random()
        #: The partition null-key records go to now, or -1 before the first one.
        self.current = -1

    def next(self, partition_count: int, available: Sequence[int]) -> int:
        """Move on to another partition: a random available one other than the
        current (any partition when none is available), and return it."""
        candidates = available or range(partition_count)
        if len(candidates) == 1:
            self.current = candidates[0]
            return self.current
        choice = self.current
        while choice == self.current:
            choice = candidates[self._random.randrange(len(candidates))]
        self.current = choice
        return choice


__all__ = ["KEY_MEMO_SIZE", "KeyedPartitioner", "StickyPartitioner"]
