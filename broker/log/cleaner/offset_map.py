"""The latest offset of each key in the dirty part of a log, in bounded memory.

Kafka's SkimpyOffsetMap keeps a 16-byte MD5 of each key and an 8-byte offset in one preallocated
buffer of ``log.cleaner.dedupe.buffer.size``. Here the map is a dict from a 16-byte BLAKE2b digest
of the key (a collision, which would drop a record, needs about 2**64 keys) to the offset; a dict
entry with its digest and offset costs about :data:`ENTRY_BYTES` (measured with tracemalloc on
CPython 3.11, at the peak after a resize), so a buffer of B bytes holds
``B * load_factor // ENTRY_BYTES`` keys: 128 MiB, Kafka's default, hold about 750,000.

When the map is full, a clean covers only the dirty records mapped so far, as in Kafka: the
offsets up to :attr:`OffsetMap.latest_offset` are compacted, the rest wait for the next clean.
"""

from __future__ import annotations

import hashlib

#: What one key costs in the map, digest and offset objects included.
ENTRY_BYTES = 160
DIGEST_BYTES = 16


def digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=DIGEST_BYTES).digest()


class OffsetMap:
    __slots__ = ("_offsets", "capacity", "latest_offset")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an offset map holds at least one key, not {capacity}")
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        #: The last offset the map covers: records after it are not compacted by this clean.
        self.latest_offset = -1

    @classmethod
    def for_memory(cls, buffer_bytes: int, load_factor: float = 0.9) -> OffsetMap:
        return cls(max(1, int(buffer_bytes * load_factor) // ENTRY_BYTES))

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Records ``offset`` as the latest of ``key``; False (nothing recorded) when the key
        is new and the map is full."""
        hashed = digest(key)
        if hashed not in self._offsets and len(self._offsets) >= self.capacity:
            return False
        self._offsets[hashed] = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 if the map does not hold it."""
        return self._offsets.get(digest(key), -1)
