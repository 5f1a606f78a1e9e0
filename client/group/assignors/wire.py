"""Consumer-protocol bytes: what JoinGroup and SyncGroup carry for "consumer" groups.

Kafka frames each ConsumerProtocolSubscription/Assignment as an int16 version
followed by the struct at that version (ConsumerProtocol.java,
MessageUtil.toVersionPrefixedByteBuffer). A reader given a version newer than
it knows reads the newest one it knows and ignores the trailing bytes: the
consumer protocol only ever appends fields, so old members and new leaders mix.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

from tributary.client.group.assignors.model import NO_GENERATION, MemberAssignment, MemberSubscription
from tributary.protocol import codec
from tributary.protocol.errors import ProtocolError
from tributary.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

# The newest version we (and Kafka 3.x clients) write: v3 adds RackId.
CONSUMER_PROTOCOL_VERSION = 3
_MAX_VERSION = 3
_INT16 = struct.Struct(">h")


def _split_version(data: bytes, what: str) -> tuple[int, bytes]:
    if len(data) < _INT16.size:
        raise ProtocolError(f"{what} of {len(data)} bytes has no version prefix")
    (version,) = _INT16.unpack_from(data)
    if version < 0:
        raise ProtocolError(f"unsupported {what} version {version}")
    return version, data[_INT16.size :]


def encode_subscription(subscription: ConsumerProtocolSubscription, version: int = CONSUMER_PROTOCOL_VERSION) -> bytes:
    return _INT16.pack(version) + codec.encode(subscription, version)


def decode_subscription(data: bytes) -> tuple[int, ConsumerProtocolSubscription]:
    """(the version the writer declared, the subscription read at min(version, 3))."""
    version, body = _split_version(data, "ConsumerProtocolSubscription")
    return version, codec.decode(ConsumerProtocolSubscription, body, min(version, _MAX_VERSION))


def encode_assignment(assignment: ConsumerProtocolAssignment, version: int = CONSUMER_PROTOCOL_VERSION) -> bytes:
    return _INT16.pack(version) + codec.encode(assignment, version)


def decode_assignment(data: bytes) -> tuple[int, ConsumerProtocolAssignment]:
    version, body = _split_version(data, "ConsumerProtocolAssignment")
    return version, codec.decode(ConsumerProtocolAssignment, body, min(version, _MAX_VERSION))


def _grouped(owned: Mapping[str, Sequence[int]] | Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    pairs = [(t, p) for t, parts in owned.items() for p in parts] if isinstance(owned, Mapping) else list(owned)
    grouped: dict[str, list[int]] = {}
    for topic, p in sorted(set(pairs)):
        grouped.setdefault(topic, []).append(p)
    return grouped


def subscription_metadata(
    topics: Iterable[str],
    *,
    user_data: bytes | None = None,
    owned: Mapping[str, Sequence[int]] | None = None,
    generation: int = NO_GENERATION,
    rack: str | None = None,
    version: int = CONSUMER_PROTOCOL_VERSION,
) -> bytes:
    """A member's JoinGroup protocol metadata; topics and owned partitions sorted, as Kafka writes them."""
    sub = ConsumerProtocolSubscription(
        topics=sorted(set(topics)),
        user_data=user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic, parts) for topic, parts in _grouped(owned or {}).items()
        ],
        generation_id=generation,
        rack_id=rack,
    )
    return encode_subscription(sub, version)


def member_subscription(metadata: bytes, group_instance_id: str | None = None) -> MemberSubscription:
    """The leader's view of one JoinGroupResponse member (its metadata and group_instance_id)."""
    _, sub = decode_subscription(metadata)
    owned: dict[str, list[int]] = {}
    for tp in sub.owned_partitions:
        owned.setdefault(tp.topic, []).extend(tp.partitions)
    return MemberSubscription(
        topics=tuple(sub.topics),
        owned=owned,
        generation=sub.generation_id,
        user_data=sub.user_data,
        group_instance_id=group_instance_id,
        rack=sub.rack_id or None,  # Kafka treats an empty rack as none
    )


def assignment_bytes(assignment: MemberAssignment, version: int = CONSUMER_PROTOCOL_VERSION) -> bytes:
    """The SyncGroup assignment for one member."""
    msg = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic, list(parts))
            for topic, parts in sorted(assignment.partitions.items())
            if parts
        ],
        user_data=assignment.user_data,
    )
    return encode_assignment(msg, version)


def member_assignment(data: bytes) -> MemberAssignment:
    """A member's assignment from SyncGroupResponse.

    Empty bytes mean "nothing assigned": the coordinator sends them to a member
    the leader's plan left out (Kafka's client would fail to parse them).
    """
    if not data:
        return MemberAssignment()
    _, msg = decode_assignment(data)
    partitions: dict[str, list[int]] = {}
    for tp in msg.assigned_partitions:
        partitions.setdefault(tp.topic, []).extend(tp.partitions)
    return MemberAssignment({t: sorted(set(ps)) for t, ps in sorted(partitions.items()) if ps}, msg.user_data)
