"""What goes into the coordinator's state machine and what comes out of it.

Requests come in as plain values (no wire messages: the handlers translate).
Out come results, and effects for the driver to carry out:

- :class:`Reply`: complete a waiting request (JoinGroup, SyncGroup, OffsetCommit)
  with its result. Requests that can be answered at once are answered the same way,
  in the effects of the call that made them.
- :class:`Write`: append records to a ``__consumer_offsets`` partition (as a producer's
  transactional batch, for TxnOffsetCommit), then report the outcome with
  ``GroupCoordinator.write_completed(write_id, error)``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tributary.broker.group.consumer_records import Assignment
from tributary.broker.group.member import Protocols, Ticket
from tributary.broker.group.offsets import OffsetAndMetadata, TopicPartition
from tributary.protocol.error_codes import ErrorCode

# --- requests -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    #: JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED and its id.
    require_known_member_id: bool = True
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    #: member id -> assignment; the leader's only (followers send none).
    assignments: dict[str, bytes]
    #: SyncGroup v5+ names them (None: not sent); checked for members of consumer groups.
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    #: Their commit timestamp is the coordinator's to set.
    offsets: dict[TopicPartition, OffsetAndMetadata]
    #: Partitions already refused by the handler (unknown topic...): answered as given.
    refused: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    #: OffsetCommit v2-4 may ask to keep these offsets this long (-1: the broker's rules).
    retention_ms: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    """ConsumerGroupHeartbeat (KIP-848). None: unchanged since the last heartbeat."""

    group_id: str
    member_id: str
    #: 0 to join, -1 to leave, -2 for a static member that leaves meaning to return.
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: The partitions the member owns, by topic id.
    owned: dict[uuid.UUID, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    #: v0 lets the coordinator name a new member; from v1 the client does (KIP-1082).
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class TxnCommitRequest:
    """TxnOffsetCommit: offsets committed inside a producer's transaction. They stay pending
    until the transaction's marker reaches the group's ``__consumer_offsets`` partition."""

    group_id: str
    producer_id: int
    producer_epoch: int
    #: v3+ (KIP-447) lets the coordinator fence a consumer of an older generation; "" / -1: not checked.
    member_id: str
    group_instance_id: str | None
    generation_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]
    refused: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


# --- what loading a partition reads, besides plain (key, value) records -----------------


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record of a transactional offset commit batch."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnEnd:
    """A transaction marker: the producer's pending offsets count (commit) or go (abort)."""

    producer_id: int
    commit: bool


Loaded = tuple[bytes, bytes | None] | TxnRecord | TxnEnd


# --- results --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    #: Every member's metadata, for the leader only.
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: The member's assignment, when it changed or the request was a full one.
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class CommitResult:
    errors: dict[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode
    #: (member, its error), in request order.
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class FetchResult:
    error: ErrorCode
    #: None: nothing committed for that partition.
    offsets: dict[TopicPartition, OffsetAndMetadata | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    error: ErrorCode
    group_id: str
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[MemberSummary, ...] = ()
    #: A ``consumer`` group: DescribeGroups answers it as Dead (v6+: GROUP_ID_NOT_FOUND).
    consumer_group: bool = False


#: (topic id, topic name, partitions) of an assignment, for describing it.
NamedPartitions = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerMemberSummary:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: NamedPartitions
    target_assignment: NamedPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupSummary:
    """A group as ConsumerGroupDescribe shows it."""

    error: ErrorCode
    group_id: str
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[ConsumerMemberSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    #: ``classic`` or ``consumer`` (ListGroups v5).
    group_type: str = "classic"


# --- effects ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    ticket: Ticket
    result: JoinResult | SyncResult | CommitResult | ConsumerHeartbeatResult


@dataclass(frozen=True, slots=True)
class Write:
    write_id: int
    #: The ``__consumer_offsets`` partition.
    partition: int
    #: (key, value) pairs; a None value is a tombstone.
    records: tuple[tuple[bytes, bytes | None], ...]
    #: (producer id, epoch): written as that producer's transactional batch (TxnOffsetCommit).
    producer: tuple[int, int] | None = None


Effect = Reply | Write
