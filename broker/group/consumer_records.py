"""The records of a ``consumer`` group (KIP-848) in ``__consumer_offsets``, in Kafka's
binary layouts, so that Kafka's tools read them and a Kafka broker could load them.

Kafka declares them in its group coordinator module
(``group-coordinator/src/main/resources/common/message/ConsumerGroup*{Key,Value}.json``,
Apache Kafka 4.0), not among the request/response schemas this project generates codecs
from; the layouts are written out here, as ``records`` does for the classic ones.

A key is an int16 *key version*, which says what the record is, then non-flexible fields
(int16-length strings). The key versions continue those of ``records`` (0-2)::

    3  ConsumerGroupMetadataKey                  group string
    4  ConsumerGroupPartitionMetadataKey         group string
    5  ConsumerGroupMemberMetadataKey            group string, member_id string
    6  ConsumerGroupTargetAssignmentMetadataKey  group string
    7  ConsumerGroupTargetAssignmentMemberKey    group string, member_id string
    8  ConsumerGroupCurrentMemberAssignmentKey   group string, member_id string
    16 ConsumerGroupRegularExpressionKey         group string, regex string (read, never written)

A value is an int16 value version (0 for all of these), then a *flexible* body: compact
strings, arrays and bytes (length + 1 as an unsigned varint, 0 for null), uuids as 16 bytes,
and a tagged-field section after each struct (unknown tags are skipped)::

    ConsumerGroupMetadataValue                 epoch int32
    ConsumerGroupPartitionMetadataValue        topics [topic_id uuid, topic_name string,
                                                       num_partitions int32,
                                                       partition_metadata [partition int32,
                                                                           racks [string]]]
    ConsumerGroupMemberMetadataValue           instance_id string?, rack_id string?,
                                               client_id string, client_host string,
                                               subscribed_topic_names [string],
                                               subscribed_topic_regex string?,
                                               rebalance_timeout_ms int32,
                                               server_assignor string?,
                                               tag 0: classic_member_metadata? {
                                                 session_timeout_ms int32,
                                                 supported_protocols [name string, metadata bytes]}
    ConsumerGroupTargetAssignmentMetadataValue assignment_epoch int32
    ConsumerGroupTargetAssignmentMemberValue   topic_partitions [topic_id uuid, partitions [int32]]
    ConsumerGroupCurrentMemberAssignmentValue  member_epoch int32, previous_member_epoch int32,
                                               state int8,
                                               assigned_partitions [topic_id uuid, partitions [int32]],
                                               partitions_pending_revocation [the same]

A null value is a tombstone. The ConsumerGroupRegularExpression records (what a regex
resolved to) are not written: the coordinator resolves a regex against the current topics
whenever it needs to (docs/groups.md), and skips them when it reads a Kafka-written log.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tributary.protocol.errors import ProtocolError
from tributary.protocol.primitives import Reader, Writer

#: Partitions by topic id: the form every assignment takes in these records.
Assignment = Mapping[uuid.UUID, frozenset[int]]

GROUP_METADATA_KEY_VERSION = 3
PARTITION_METADATA_KEY_VERSION = 4
MEMBER_METADATA_KEY_VERSION = 5
TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 6
TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 7
CURRENT_ASSIGNMENT_KEY_VERSION = 8
REGULAR_EXPRESSION_KEY_VERSION = 16
#: The key versions this module reads.
KEY_VERSIONS = frozenset({3, 4, 5, 6, 7, 8, 16})
#: Every value written here is version 0.
VALUE_VERSION = 0
_CLASSIC_MEMBER_METADATA_TAG = 0


class ConsumerRecordError(ValueError):
    """A consumer-group record that cannot be read."""


# --- keys --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupEpochKey:
    """ConsumerGroupMetadataKey: the group's epoch."""

    group: str


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataKey:
    """ConsumerGroupPartitionMetadataKey: the topics the group subscribes to, with their sizes."""

    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadataKey:
    """ConsumerGroupMemberMetadataKey: a member's subscription and identity."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochKey:
    """ConsumerGroupTargetAssignmentMetadataKey: the epoch of the target assignment."""

    group: str


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberKey:
    """ConsumerGroupTargetAssignmentMemberKey: a member's share of the target assignment."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class CurrentAssignmentKey:
    """ConsumerGroupCurrentMemberAssignmentKey: what a member owns now, at which epoch."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RegularExpressionKey:
    """ConsumerGroupRegularExpressionKey (Kafka 4.0): read so that a log Kafka wrote loads."""

    group: str
    regex: str


ConsumerKey = (
    GroupEpochKey
    | SubscriptionMetadataKey
    | MemberMetadataKey
    | TargetAssignmentEpochKey
    | TargetAssignmentMemberKey
    | CurrentAssignmentKey
    | RegularExpressionKey
)

_KEY_VERSION: dict[type, int] = {
    GroupEpochKey: GROUP_METADATA_KEY_VERSION,
    SubscriptionMetadataKey: PARTITION_METADATA_KEY_VERSION,
    MemberMetadataKey: MEMBER_METADATA_KEY_VERSION,
    TargetAssignmentEpochKey: TARGET_ASSIGNMENT_METADATA_KEY_VERSION,
    TargetAssignmentMemberKey: TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
    CurrentAssignmentKey: CURRENT_ASSIGNMENT_KEY_VERSION,
    RegularExpressionKey: REGULAR_EXPRESSION_KEY_VERSION,
}


def encode_key(key: ConsumerKey) -> bytes:
    w = Writer()
    w.int16(_KEY_VERSION[type(key)])
    w.string(key.group)
    if isinstance(key, (MemberMetadataKey, TargetAssignmentMemberKey, CurrentAssignmentKey)):
        w.string(key.member_id)
    elif isinstance(key, RegularExpressionKey):
        w.string(key.regex)
    return w.getvalue()


def decode_key_body(version: int, r: Reader) -> ConsumerKey:
    """The rest of a key whose int16 version (in :data:`KEY_VERSIONS`) was read already."""
    read = _KEY_READERS.get(version)
    if read is None:
        raise ProtocolError(f"not a consumer group key version: {version}")
    return read(r.string(), r)


_KEY_READERS: dict[int, Callable[[str, Reader], ConsumerKey]] = {
    GROUP_METADATA_KEY_VERSION: lambda group, _: GroupEpochKey(group),
    PARTITION_METADATA_KEY_VERSION: lambda group, _: SubscriptionMetadataKey(group),
    MEMBER_METADATA_KEY_VERSION: lambda group, r: MemberMetadataKey(group, r.string()),
    TARGET_ASSIGNMENT_METADATA_KEY_VERSION: lambda group, _: TargetAssignmentEpochKey(group),
    TARGET_ASSIGNMENT_MEMBER_KEY_VERSION: lambda group, r: TargetAssignmentMemberKey(group, r.string()),
    CURRENT_ASSIGNMENT_KEY_VERSION: lambda group, r: CurrentAssignmentKey(group, r.string()),
    REGULAR_EXPRESSION_KEY_VERSION: lambda group, r: RegularExpressionKey(group, r.string()),
}


# --- values ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it (the rack list Kafka 4.0 no longer uses
    is written empty)."""

    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member that joined with the classic protocol (JoinGroup) into a consumer group."""

    session_timeout_ms: int
    #: (protocol name, subscription metadata) in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    #: MemberState's byte: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerValue = (
    GroupEpochValue
    | SubscriptionMetadataValue
    | MemberMetadataValue
    | TargetAssignmentEpochValue
    | TargetAssignmentMemberValue
    | CurrentAssignmentValue
    | RegularExpressionValue
)


class _Out:
    """A flexible-version writer: compact lengths, and an empty tagged-field section per struct."""

    def __init__(self, *, versioned: bool = True) -> None:
        self.w = Writer()
        if versioned:
            self.w.int16(VALUE_VERSION)

    def length(self, n: int | None) -> None:
        self.w.unsigned_varint(0 if n is None else n + 1)

    def string(self, value: str | None) -> None:
        self.w.compact_nullable_string(value)

    def strings(self, values: Iterable[str]) -> None:
        items = list(values)
        self.length(len(items))
        for item in items:
            self.w.compact_string(item)

    def assignment(self, assignment: Assignment) -> None:
        self.length(len(assignment))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: item[0].bytes):
            self.w.uuid(topic_id)
            self.length(len(partitions))
            for p in sorted(partitions):
                self.w.int32(p)
            self.no_tags()

    def no_tags(self) -> None:
        self.w.unsigned_varint(0)

    def getvalue(self) -> bytes:
        self.no_tags()  # the top-level struct's
        return self.w.getvalue()


def encode_value(value: ConsumerValue) -> bytes:
    out = _Out()
    w = out.w
    if isinstance(value, GroupEpochValue):
        w.int32(value.epoch)
    elif isinstance(value, SubscriptionMetadataValue):
        out.length(len(value.topics))
        for topic in value.topics:
            w.uuid(topic.topic_id)
            w.compact_string(topic.name)
            w.int32(topic.partitions)
            out.length(0)  # partition_metadata: unused since Kafka 4.0
            out.no_tags()
    elif isinstance(value, MemberMetadataValue):
        out.string(value.instance_id)
        out.string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        out.strings(value.subscribed_topic_names)
        out.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        out.string(value.server_assignor)
        if value.classic is None:
            return out.getvalue()
        body = _Out(versioned=False)  # a tagged field's body carries no version
        body.w.int32(value.classic.session_timeout_ms)
        body.length(len(value.classic.protocols))
        for name, metadata in value.classic.protocols:
            body.w.compact_string(name)
            body.w.compact_bytes(metadata)
            body.no_tags()
        tagged = body.getvalue()
        w.unsigned_varint(1)  # one tagged field
        w.unsigned_varint(_CLASSIC_MEMBER_METADATA_TAG)
        w.unsigned_varint(len(tagged))
        w.raw(tagged)
        return w.getvalue()
    elif isinstance(value, TargetAssignmentEpochValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, TargetAssignmentMemberValue):
        out.assignment(value.partitions)
    elif isinstance(value, CurrentAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        out.assignment(value.assigned)
        out.assignment(value.pending_revocation)
    else:
        out.strings(value.topics)
        w.int64(value.version)
        w.int64(value.timestamp)
    return out.getvalue()


def _array(r: Reader, item: Callable[[], object]) -> list[object]:
    n = r.compact_array_length()
    if n < 0:
        raise ProtocolError("a non-nullable array is null")
    return [item() for _ in range(n)]


def _tags(r: Reader) -> dict[int, memoryview]:
    tags: dict[int, memoryview] = {}
    for _ in range(r.unsigned_varint()):
        tag = r.unsigned_varint()
        tags[tag] = r.raw(r.unsigned_varint(), "tagged field")
    return tags


def _assignment(r: Reader) -> Assignment:
    result: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(max(r.compact_array_length(), 0)):
        topic_id = r.uuid()
        partitions = frozenset(r.int32() for _ in range(max(r.compact_array_length(), 0)))
        _tags(r)
        if partitions:  # an empty entry is no assignment (and would make equal ones differ)
            result[topic_id] = result.get(topic_id, frozenset()) | partitions
    return result


def _topic_metadata(r: Reader) -> TopicMetadata:
    topic_id, name, partitions = r.uuid(), r.compact_string(), r.int32()
    for _ in range(max(r.compact_array_length(), 0)):  # partition_metadata: racks, ignored
        r.int32()
        _array(r, r.compact_string)
        _tags(r)
    _tags(r)
    return TopicMetadata(topic_id, name, partitions)


def _classic(data: memoryview) -> ClassicMemberMetadata:
    r = Reader(data)
    session_timeout = r.int32()
    protocols = []
    for _ in range(max(r.compact_array_length(), 0)):
        protocols.append((r.compact_string(), r.compact_bytes()))
        _tags(r)
    _tags(r)
    return ClassicMemberMetadata(session_timeout, tuple(protocols))


def decode_value(key: ConsumerKey, data: bytes) -> ConsumerValue:
    """The value of a record with ``key``; :class:`ConsumerRecordError` if unreadable."""
    try:
        r = Reader(data)
        version = r.int16()
        if version != VALUE_VERSION:
            raise ConsumerRecordError(f"{type(key).__name__}: unknown value version {version}")
        value: ConsumerValue
        if isinstance(key, GroupEpochKey):
            value = GroupEpochValue(r.int32())
        elif isinstance(key, SubscriptionMetadataKey):
            count = max(r.compact_array_length(), 0)
            value = SubscriptionMetadataValue(tuple(_topic_metadata(r) for _ in range(count)))
        elif isinstance(key, MemberMetadataKey):
            instance_id, rack_id = r.compact_nullable_string(), r.compact_nullable_string()
            client_id, client_host = r.compact_string(), r.compact_string()
            names = tuple(str(n) for n in _array(r, r.compact_string))
            regex, rebalance_timeout = r.compact_nullable_string(), r.int32()
            assignor = r.compact_nullable_string()
            tagged = _tags(r)
            classic = _classic(tagged[_CLASSIC_MEMBER_METADATA_TAG]) if _CLASSIC_MEMBER_METADATA_TAG in tagged else None
            value = MemberMetadataValue(
                instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor, classic
            )
            return value
        elif isinstance(key, TargetAssignmentEpochKey):
            value = TargetAssignmentEpochValue(r.int32())
        elif isinstance(key, TargetAssignmentMemberKey):
            value = TargetAssignmentMemberValue(_assignment(r))
        elif isinstance(key, CurrentAssignmentKey):
            epoch, previous, state = r.int32(), r.int32(), r.int8()
            value = CurrentAssignmentValue(epoch, previous, state, _assignment(r), _assignment(r))
        else:
            topics = tuple(str(t) for t in _array(r, r.compact_string))
            value = RegularExpressionValue(topics, r.int64(), r.int64())
        _tags(r)
    except ProtocolError as exc:
        raise ConsumerRecordError(f"malformed {type(key).__name__} value: {exc}") from None
    return value
