"""One group's membership data and the transitions between Kafka's group states.

The states, as Kafka's classic group protocol defines them:

- **Empty**: no members. Offsets may still be committed and fetched (a group used
  only for offset storage stays Empty). A JoinGroup starts a rebalance.
- **PreparingRebalance**: waiting for members to (re)join. Heartbeats answer
  REBALANCE_IN_PROGRESS; the rebalance completes when every known member has
  joined, or when the rebalance timeout expires (members that did not rejoin are
  dropped).
- **CompletingRebalance**: the new generation exists; waiting for the leader's
  SyncGroup with the assignment. Followers' SyncGroups wait too.
- **Stable**: assignment handed out; heartbeats keep members alive.
- **Dead**: removed (unloaded, or emptied with its offsets expired); final.

This module holds the data and the transitions that need no clock or I/O
(Kafka's GroupMetadata); the decisions taken on requests and timers live in
:mod:`.membership`.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum

from tributary.broker.group.member import Member, Ticket
from tributary.broker.group.offsets import GroupOffsets
from tributary.broker.group.records import StoredGroup, StoredMember
from tributary.protocol import codec
from tributary.protocol.errors import ProtocolError
from tributary.protocol.messages import ConsumerProtocolSubscription
from tributary.protocol.supported import CONSUMER_PROTOCOL_VERSIONS

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class Group:
    def __init__(self, group_id: str, partition: int, now_ms: int) -> None:
        self.group_id = group_id
        #: The ``__consumer_offsets`` partition the group lives in.
        self.partition = partition
        self.state = GroupState.EMPTY
        #: When the group entered its current state (Kafka's currentStateTimestamp): an
        #: Empty group's offsets expire counting from here.
        self.state_timestamp = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        #: In join order: the first is leader, and the next one takes over when it goes.
        self.members: dict[str, Member] = {}
        #: group.instance.id -> member id of the static members.
        self.static_members: dict[str, str] = {}
        #: Member ids handed out with MEMBER_ID_REQUIRED, not joined yet.
        self.pending_members: set[str] = set()
        #: Members of the new generation that have not sent their SyncGroup yet.
        self.pending_sync: set[str] = set()
        #: A member joined during the first rebalance's initial delay: delay again.
        self.new_member_added = False
        #: The topics the members subscribe to (consumer protocol only; None: unknown).
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets = GroupOffsets()
        self._protocol_support: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state}, generation {self.generation}, {len(self.members)} members)"

    # --- state ------------------------------------------------------------------

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: no transition from {self.state} to {state}")
        self.state = state
        self.state_timestamp = now_ms

    # --- members ------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def add(self, member: Member, ticket: Ticket | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._protocol_support.update(member.protocol_names)
        member.awaiting_join = ticket
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._protocol_support.subtract(member.protocol_names)
            if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_protocols(self, member: Member, protocols: tuple[tuple[str, bytes], ...]) -> None:
        self._protocol_support.subtract(member.protocol_names)
        member.set_protocols(protocols)
        self._protocol_support.update(member.protocol_names)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member ``instance_id`` a new member id (its old incarnation is
        fenced by the caller); it keeps its place, its assignment and its leadership."""
        member = self.members[old_id]
        member.member_id = new_id
        # Rebuilt so that the member keeps its position (and with it the leader order).
        self.members = {(new_id if mid == old_id else mid): m for mid, m in self.members.items()}
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined (the old one may not have);
        False when no member rejoined at all."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols ------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        size = len(self.members)
        return {name for name, count in self._protocol_support.items() if count == size and count > 0}

    def supports_protocols(self, protocol_type: str, names: frozenset[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all support;
        the most votes win (ties go to the protocol voted for first, in join order)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, group instance id, metadata for the chosen protocol), for the leader."""
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        """The union of the consumer subscriptions, read from the members' metadata
        (the only reason the coordinator ever looks inside it: offset expiry)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else frozenset()
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    # --- persistence ------------------------------------------------------------------

    def to_stored(self, assignment: dict[str, bytes]) -> StoredGroup:
        """The group as its GroupMetadataValue records it, with ``assignment``."""
        protocol = self.protocol_name
        return StoredGroup(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp,
            members=tuple(
                StoredMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(protocol) if protocol is not None else b"",
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_stored(cls, group_id: str, partition: int, stored: StoredGroup, now_ms: int) -> Group:
        """A group as loaded from its last metadata record: Stable with its members
        and their assignment, or Empty."""
        group = cls(group_id, partition, now_ms)
        group.generation = stored.generation
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol
        group.state_timestamp = stored.current_state_timestamp if stored.current_state_timestamp >= 0 else now_ms
        protocol = stored.protocol or ""
        for m in stored.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=stored.protocol_type,
                protocols=((protocol, m.subscription),),
                assignment=m.assignment,
            )
            group.add(member, None)
        group.leader_id = stored.leader if stored.leader in group.members else next(iter(group.members), None)
        if group.members:
            group.state = GroupState.STABLE
        group.subscribed_topics = group._compute_subscribed_topics()
        return group


def parse_subscription(metadata: bytes) -> list[str] | None:
    """The topics of a consumer-protocol subscription (int16 version, then the body);
    None if it is not one we can read."""
    if len(metadata) < 2:
        return None
    version = int.from_bytes(metadata[:2], "big", signed=True)
    version = min(max(version, 0), CONSUMER_PROTOCOL_VERSIONS.hi or 0)
    try:
        return list(codec.decode(ConsumerProtocolSubscription, metadata[2:], version).topics)
    except ProtocolError:
        return None
