"""Kafka's default partitioner hash: 32-bit MurmurHash2 as in the Java client.

:func:`murmur2` matches ``org.apache.kafka.common.utils.Utils.murmur2`` bit
for bit, including its signed 32-bit result, so keyed records land on the
same partitions as with the Java client, librdkafka's ``murmur2_random`` and
kafka-python.
"""

from __future__ import annotations

import struct

from tributary.protocol.crc32c import BytesLike

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: BytesLike) -> int:
    """The Java client's murmur2 of ``data``: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    # The body as little-endian 32-bit words in one call, not byte by byte.
    for word in struct.unpack_from(f"<{length >> 2}I", data):
        k = (word * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    remaining = length & 3
    if remaining:
        if remaining == 3:
            h ^= data[tail + 2] << 16
        if remaining >= 2:
            h ^= data[tail + 1] << 8
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key: BytesLike, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {num_partitions}")
    # Java's Utils.toPositive: clear the sign bit (not abs, which differs at MIN_VALUE).
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


__all__ = ["murmur2", "partition_for_key"]
