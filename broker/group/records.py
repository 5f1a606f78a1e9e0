"""The records of ``__consumer_offsets``, in Kafka's binary layouts, so Kafka's own
tools (``kafka-console-consumer --formatter ...OffsetsMessageFormatter``) read the
topic as they would a Kafka cluster's.

A key starts with an int16 that says what the record is:

- 0 or 1, an offset commit: ``group string, topic string, partition int32``;
- 2, a group's metadata: ``group string``;
- 3 to 8 (and 16), the records of a ``consumer`` group (KIP-848): see ``consumer_records``.

A value starts with its own int16 version. Offset commit values::

    v0: offset int64, metadata string, timestamp int64
    v1: offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
    v2: offset int64, metadata string, commit_timestamp int64
    v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    v4: v3 with compact strings and tagged fields

Group metadata values::

    protocol_type string, generation int32, protocol nullable string,
    leader nullable string, [v2+] current_state_timestamp int64,
    members [member_id string, [v3+] group_instance_id nullable string,
             client_id string, client_host string, [v1+] rebalance_timeout int32,
             session_timeout int32, subscription bytes, assignment bytes]

(v4: compact and tagged.) A null value is a tombstone: the offset or the group is
gone. We write offset values v3 (v1 when the commit carries an expire timestamp, as
Kafka does) and group values v3; we read every version up to 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.broker.group import consumer_records
from tributary.broker.group.consumer_records import ConsumerKey
from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.protocol.errors import ProtocolError
from tributary.protocol.primitives import Reader, Writer

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
_FLEXIBLE = 4


class RecordFormatError(ValueError):
    """A record of ``__consumer_offsets`` we cannot read."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[StoredMember, ...]


# --- keys -------------------------------------------------------------------


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    w = Writer()
    w.int16(OFFSET_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return w.getvalue()


def encode_group_key(group: str) -> bytes:
    w = Writer()
    w.int16(GROUP_KEY_VERSION)
    w.string(group)
    return w.getvalue()


def decode_key(data: bytes) -> OffsetKey | GroupKey | ConsumerKey:
    """An offset commit's key, a classic group's, or a consumer group's (``consumer_records``)."""
    try:
        r = Reader(data)
        version = r.int16()
        if version in (0, 1):
            return OffsetKey(r.string(), r.string(), r.int32())
        if version == GROUP_KEY_VERSION:
            return GroupKey(r.string())
        if version in consumer_records.KEY_VERSIONS:
            return consumer_records.decode_key_body(version, r)
    except ProtocolError as exc:
        raise RecordFormatError(f"malformed key: {exc}") from None
    raise RecordFormatError(f"unknown key version {version}")


# --- offset commit values -----------------------------------------------------


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    w = Writer()
    if value.expire_timestamp is not None:
        w.int16(OFFSET_VALUE_VERSION_WITH_EXPIRY)
        w.int64(value.offset)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
    else:
        w.int16(OFFSET_VALUE_VERSION)
        w.int64(value.offset)
        w.int32(value.leader_epoch)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
    return w.getvalue()


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    try:
        r = Reader(data)
        version = r.int16()
        if not 0 <= version <= _FLEXIBLE:
            raise RecordFormatError(f"unknown offset commit value version {version}")
        flexible = version >= _FLEXIBLE
        offset = r.int64()
        leader_epoch = r.int32() if version >= 3 else -1
        metadata = r.compact_string() if flexible else r.string()
        commit_timestamp = r.int64()
        expire_timestamp = r.int64() if version == 1 else None
        if flexible:
            _skip_tagged_fields(r)
    except ProtocolError as exc:
        raise RecordFormatError(f"malformed offset commit value: {exc}") from None
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


# --- group metadata values ----------------------------------------------------


def encode_group_value(group: StoredGroup) -> bytes:
    w = Writer()
    w.int16(GROUP_VALUE_VERSION)
    w.string(group.protocol_type)
    w.int32(group.generation)
    w.nullable_string(group.protocol)
    w.nullable_string(group.leader)
    w.int64(group.current_state_timestamp)
    w.int32(len(group.members))
    for m in group.members:
        w.string(m.member_id)
        w.nullable_string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.getvalue()


class _Fields:
    """Reads classic or compact (flexible) encodings of the same field types."""

    def __init__(self, r: Reader, flexible: bool) -> None:
        self.r = r
        self.flexible = flexible

    def string(self) -> str:
        return self.r.compact_string() if self.flexible else self.r.string()

    def nullable_string(self) -> str | None:
        return self.r.compact_nullable_string() if self.flexible else self.r.nullable_string()

    def bytes_(self) -> bytes:
        return self.r.compact_bytes() if self.flexible else self.r.bytes_()

    def array_length(self) -> int:
        n = self.r.compact_array_length() if self.flexible else self.r.array_length()
        if n < 0:
            raise ProtocolError("members array is null")
        return n

    def end_struct(self) -> None:
        if self.flexible:
            _skip_tagged_fields(self.r)


def decode_group_value(data: bytes) -> StoredGroup:
    try:
        r = Reader(data)
        version = r.int16()
        if not 0 <= version <= _FLEXIBLE:
            raise RecordFormatError(f"unknown group metadata value version {version}")
        f = _Fields(r, version >= _FLEXIBLE)
        protocol_type = f.string()
        generation = r.int32()
        protocol = f.nullable_string()
        leader = f.nullable_string()
        current_state_timestamp = r.int64() if version >= 2 else -1
        members = []
        for _ in range(f.array_length()):
            member_id = f.string()
            instance_id = f.nullable_string() if version >= 3 else None
            client_id = f.string()
            client_host = f.string()
            rebalance_timeout = r.int32() if version >= 1 else -1
            session_timeout = r.int32()
            subscription = f.bytes_()
            assignment = f.bytes_()
            f.end_struct()
            rebalance_timeout = session_timeout if rebalance_timeout < 0 else rebalance_timeout
            members.append(
                StoredMember(
                    member_id,
                    instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout,
                    session_timeout,
                    subscription,
                    assignment,
                )
            )
        f.end_struct()
    except ProtocolError as exc:
        raise RecordFormatError(f"malformed group metadata value: {exc}") from None
    return StoredGroup(protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members))


def _skip_tagged_fields(r: Reader) -> None:
    for _ in range(r.unsigned_varint()):
        r.unsigned_varint()  # tag
        r.raw(r.unsigned_varint(), "tagged field")
