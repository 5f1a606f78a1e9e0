"""The user_data the sticky assignors put in a member's subscription.

"sticky" (eager) members revoke everything before joining, so the only record
of what they owned is their user_data: Kafka's StickyAssignorUserData (the
schema in StickyAssignor.java; kafka-python ships it as
StickyAssignorUserData.json). Kafka always writes version 1 and reads version 1,
falling back to version 0, then to "owns nothing" if neither parses. Unlike the
consumer-protocol structs it carries no int16 version prefix.

"cooperative-sticky" members report owned partitions and generation in the
subscription's own fields (v1+/v2+), but still write a bare int32 generation as
user_data for leaders that only read subscription v0/v1.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from tributary.client.group.assignors.model import NO_GENERATION, TopicPartition
from tributary.protocol import codec
from tributary.protocol.schema import NO_VERSIONS, Field, Message, Struct
from tributary.protocol.schema import Versions as V


@dataclass(slots=True)
class StickyAssignorUserData:
    """StickyAssignorUserData: versions 0-1, flexible none."""

    SPEC: ClassVar[Message]

    @dataclass(slots=True)
    class TopicPartition:
        topic: str = ""
        partitions: list[int] = field(default_factory=list)

    previous_assignment: list[StickyAssignorUserData.TopicPartition] = field(default_factory=list)
    generation: int = NO_GENERATION


StickyAssignorUserData.SPEC = Message(
    name="StickyAssignorUserData",
    kind="data",
    api_key=None,
    valid=V(0, 1),
    flexible=NO_VERSIONS,
    struct=Struct(
        StickyAssignorUserData,
        (
            Field(
                "previous_assignment",
                "PreviousAssignment",
                "[]TopicPartition",
                V(0),
                default=[],
                struct=Struct(
                    StickyAssignorUserData.TopicPartition,
                    (
                        Field("topic", "Topic", "string", V(0), default=""),
                        Field("partitions", "Partitions", "[]int32", V(0), default=[]),
                    ),
                ),
            ),
            Field("generation", "Generation", "int32", V(1), default=NO_GENERATION, ignorable=True),
        ),
    ),
)

STICKY_USER_DATA_VERSION = 1
_INT32 = struct.Struct(">i")


def encode_sticky_user_data(owned: Mapping[str, Sequence[int]], generation: int) -> bytes:
    """StickyAssignorUserData v1 for ``owned`` (topics and partitions sorted) at ``generation``."""
    data = StickyAssignorUserData(
        previous_assignment=[
            StickyAssignorUserData.TopicPartition(topic, sorted(parts))
            for topic, parts in sorted(owned.items())
            if parts
        ],
        generation=generation,
    )
    return codec.encode(data, STICKY_USER_DATA_VERSION)


def decode_sticky_user_data(data: bytes | None) -> tuple[list[TopicPartition], int]:
    """(previously owned partitions, generation) from a sticky member's user_data.

    Absent, empty or unreadable user data means "owned nothing, no generation",
    as in Kafka (which would ignore, not reject, a member with bad user data).
    """
    if not data:
        return [], NO_GENERATION
    for version in (1, 0):
        try:
            decoded = codec.decode(StickyAssignorUserData, data, version)
        except ValueError:  # ProtocolError is a ValueError; so is bad UTF-8
            continue
        partitions = [(tp.topic, p) for tp in decoded.previous_assignment for p in tp.partitions]
        return partitions, decoded.generation if version >= 1 else NO_GENERATION
    return [], NO_GENERATION


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor's user data: its generation as a bare int32."""
    return _INT32.pack(generation)


def decode_cooperative_user_data(data: bytes | None) -> int:
    """The generation in a cooperative member's user_data; -1 when absent or unreadable."""
    if data is None or len(data) < _INT32.size:
        return NO_GENERATION
    return int(_INT32.unpack_from(data)[0])
