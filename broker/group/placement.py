"""Which ``__consumer_offsets`` partition, and so which broker, coordinates a group.

Kafka places a group at ``Utils.abs(groupId.hashCode()) % partitionCount``; doing
the same, with Java's String.hashCode to the bit, keeps a group on the same
partition as a Kafka cluster would (tools that read the topic look there).
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"

_INT32_MIN = -(2**31)


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code
    units, in 32-bit two's complement arithmetic."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: like Math.abs, but Integer.MIN_VALUE gives 0 rather than itself."""
    return 0 if value == _INT32_MIN else abs(value)


def partition_for(group_id: str, partition_count: int) -> int:
    return java_abs(java_string_hashcode(group_id)) % partition_count
