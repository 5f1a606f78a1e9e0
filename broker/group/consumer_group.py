"""A ``consumer`` group (KIP-848): its members, epochs, target assignment and who owns
which partition, rebuilt from its records.

The group's state is exactly what its records in ``__consumer_offsets`` say
(:mod:`.consumer_records`): the coordinator decides a change as records, applies them here
with :meth:`ConsumerGroup.replay`, then writes them; loading a partition replays the same
records, so a restarted coordinator, or the next leader of the partition, holds the same
group. (Kafka's coordinator works the same way.) What is not in the records is derived:
the group's state, the epoch at which each partition is owned, the members per static
instance id.

The group's state (what DescribeGroups and ListGroups show) follows from its epochs:
Empty (no members), Assigning (the group epoch is ahead of the target assignment's),
Reconciling (some member has not reached the target yet), Stable.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from tributary.broker.group.consumer_records import (
    Assignment,
    ConsumerKey,
    ConsumerValue,
    CurrentAssignmentKey,
    CurrentAssignmentValue,
    GroupEpochKey,
    GroupEpochValue,
    MemberMetadataKey,
    MemberMetadataValue,
    SubscriptionMetadataKey,
    SubscriptionMetadataValue,
    TargetAssignmentEpochKey,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TopicMetadata,
)
from tributary.broker.group.offsets import GroupOffsets
from tributary.broker.group.reconciliation import MemberState, Reconciled

#: A member's epoch once it has left (Kafka's LEAVE_GROUP_MEMBER_EPOCH), and the epoch a
#: static member announces when it leaves meaning to come back (LEAVE_GROUP_STATIC_MEMBER_EPOCH).
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class InconsistentRecords(Exception):
    """Records that contradict the group they are applied to (two owners of a partition,
    a member removed before its assignment): a bug, or a log that is not ours."""


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """One member: who it is and what it subscribes to (its MemberMetadata record) and
    where it stands in the reconciliation (its CurrentMemberAssignment record)."""

    member_id: str
    metadata: MemberMetadataValue = field(default_factory=MemberMetadataValue)
    assignment: Reconciled = field(default_factory=Reconciled)

    @property
    def instance_id(self) -> str | None:
        return self.metadata.instance_id

    @property
    def epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def state(self) -> MemberState:
        return self.assignment.state

    @property
    def uses_classic(self) -> bool:
        """Joined with JoinGroup (the classic protocol) rather than ConsumerGroupHeartbeat."""
        return self.metadata.classic is not None

    @property
    def rebalance_timeout_ms(self) -> int:
        return self.metadata.rebalance_timeout_ms

    def assignment_value(self) -> CurrentAssignmentValue:
        a = self.assignment
        return CurrentAssignmentValue(
            a.member_epoch, a.previous_member_epoch, int(a.state), a.assigned, a.pending_revocation
        )


def assignment_from_value(value: CurrentAssignmentValue) -> Reconciled:
    return Reconciled(
        value.member_epoch,
        value.previous_member_epoch,
        MemberState.of(value.state),
        value.assigned,
        value.pending_revocation,
    )


@dataclass(frozen=True, slots=True)
class TopicImage:
    """The cluster's topics as the coordinator last heard of them."""

    by_name: Mapping[str, TopicMetadata] = field(default_factory=dict)

    def by_id(self) -> dict[uuid.UUID, TopicMetadata]:
        return {t.topic_id: t for t in self.by_name.values()}


class ConsumerGroup:
    def __init__(self, group_id: str, partition: int, offsets: GroupOffsets | None = None) -> None:
        self.group_id = group_id
        #: The ``__consumer_offsets`` partition the group lives in.
        self.partition = partition
        self.group_epoch = 0
        #: The epoch of the target assignment (-1 once its record is deleted).
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        #: Each member's share of the target assignment.
        self.targets: dict[str, Assignment] = {}
        #: The subscribed topics as the group last computed its target from them.
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.static_members: dict[str, str] = {}
        #: topic id -> partition -> the epoch of the member owning it (assigned or being revoked).
        self.partition_epochs: dict[uuid.UUID, dict[int, int]] = {}
        # Committed offsets live with the group (they carry over when it changes type).
        self.offsets = offsets if offsets is not None else GroupOffsets()
        self.dead = False
        #: Soft state: the topics changed since the subscription metadata was computed.
        self.metadata_stale = False
        #: Soft state: what each regex subscription matches among the current topics.
        self.resolved_regexes: dict[str, frozenset[str]] = {}

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.group_id!r}, {self.state}, epoch {self.group_epoch}, {len(self.members)} members)"

    # --- derived state ----------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.assignment.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition, or -1 if nobody does."""
        return self.partition_epochs.get(topic_id, {}).get(partition, -1)

    def owner_epochs(self) -> dict[tuple[uuid.UUID, int], int]:
        return {(t, p): e for t, ps in self.partition_epochs.items() for p, e in ps.items()}

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        """The topic names a member subscribes to: its list and what its regex matches."""
        names = frozenset(member.metadata.subscribed_topic_names)
        regex = member.metadata.subscribed_topic_regex
        if regex:
            names |= self.resolved_regexes.get(regex, frozenset())
        return names

    def subscribed_topics(self, members: Iterable[ConsumerMember] | None = None) -> Counter[str]:
        """How many members subscribe to each topic."""
        counts: Counter[str] = Counter()
        for member in self.members.values() if members is None else members:
            counts.update(self.member_topics(member))
        return counts

    def regexes(self) -> frozenset[str]:
        return frozenset(r for m in self.members.values() if (r := m.metadata.subscribed_topic_regex))

    def preferred_assignor(self, members: Iterable[ConsumerMember]) -> str | None:
        """The server assignor most members ask for (ties: the first in name order)."""
        counts = Counter(m.metadata.server_assignor for m in members if m.metadata.server_assignor)
        if not counts:
            return None
        return min(counts, key=lambda name: (-counts[name], name))

    @property
    def classic_members(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic)

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's supportsClassicProtocols: a consumer-protocol JoinGroup is welcome if one of
        its protocols is supported by every member that joined with the classic protocol."""
        if protocol_type != "consumer":
            return False
        wanted = set(names)
        if not self.members:
            return bool(wanted)
        supported = [{p for p, _ in m.metadata.classic.protocols} for m in self.members.values() if m.metadata.classic]
        return any(all(name in protocols for protocols in supported) for name in wanted)

    # --- records ------------------------------------------------------------------------------

    def snapshot(self) -> ConsumerGroup:
        """A copy to restore if a write fails (members and assignments are immutable, so
        copying the containers suffices; the offsets stay shared)."""
        copy = ConsumerGroup(self.group_id, self.partition, self.offsets)
        copy.group_epoch, copy.assignment_epoch = self.group_epoch, self.assignment_epoch
        copy.members = dict(self.members)
        copy.targets = dict(self.targets)
        copy.subscription_metadata = dict(self.subscription_metadata)
        copy.static_members = dict(self.static_members)
        copy.partition_epochs = {t: dict(ps) for t, ps in self.partition_epochs.items()}
        copy.dead, copy.metadata_stale = self.dead, self.metadata_stale
        copy.resolved_regexes = dict(self.resolved_regexes)
        return copy

    def restore(self, saved: ConsumerGroup) -> None:
        for name in (
            "group_epoch",
            "assignment_epoch",
            "members",
            "targets",
            "subscription_metadata",
            "static_members",
            "partition_epochs",
            "dead",
            "metadata_stale",
            "resolved_regexes",
        ):
            setattr(self, name, getattr(saved, name))

    def replay(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        """Apply one record (None: a tombstone), as Kafka's GroupMetadataManager.replay.
        What a regex resolved to (RegularExpressionKey) is worked out again from the topics."""
        if isinstance(key, GroupEpochKey):
            self._replay_group_epoch(value)
        elif isinstance(key, SubscriptionMetadataKey):
            assert value is None or isinstance(value, SubscriptionMetadataValue)
            self.subscription_metadata = {t.name: t for t in value.topics} if value is not None else {}
        elif isinstance(key, MemberMetadataKey):
            self._replay_member_metadata(key.member_id, value)
        elif isinstance(key, TargetAssignmentMemberKey):
            if value is None:
                self.targets.pop(key.member_id, None)
            else:
                assert isinstance(value, TargetAssignmentMemberValue)
                self.targets[key.member_id] = value.partitions
        elif isinstance(key, TargetAssignmentEpochKey):
            self._replay_target_epoch(value)
        elif isinstance(key, CurrentAssignmentKey):
            self._replay_current_assignment(key.member_id, value)

    def _replay_group_epoch(self, value: ConsumerValue | None) -> None:
        if value is None:
            if self.members or self.targets:
                raise InconsistentRecords(f"group {self.group_id} deleted while it has members")
            self.dead = True
        else:
            assert isinstance(value, GroupEpochValue)
            self.group_epoch = value.epoch

    def _replay_target_epoch(self, value: ConsumerValue | None) -> None:
        if value is None:
            if self.targets:
                raise InconsistentRecords(f"group {self.group_id}: target assignment deleted with members in it")
            self.assignment_epoch = -1
        else:
            assert isinstance(value, TargetAssignmentEpochValue)
            self.assignment_epoch = value.assignment_epoch

    def _replay_member_metadata(self, member_id: str, value: ConsumerValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is None:
                return
            if old.epoch != LEAVE_EPOCH or member_id in self.targets:
                raise InconsistentRecords(f"group {self.group_id}: member {member_id} deleted before its assignments")
            self._update(old, None)
            return
        assert isinstance(value, MemberMetadataValue)
        self._update(old, replace(old, metadata=value) if old else ConsumerMember(member_id, value))

    def _replay_current_assignment(self, member_id: str, value: ConsumerValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                left = Reconciled(LEAVE_EPOCH, LEAVE_EPOCH, old.state, {}, {})
                self._update(old, replace(old, assignment=left))
            return
        assert isinstance(value, CurrentAssignmentValue)
        assignment = assignment_from_value(value)
        new = replace(old, assignment=assignment) if old else ConsumerMember(member_id, assignment=assignment)
        self._update(old, new)

    def _update(self, old: ConsumerMember | None, new: ConsumerMember | None) -> None:
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
            del self.members[old.member_id]
        if new is not None:
            self.members[new.member_id] = new
            if new.instance_id is not None:
                self.static_members[new.instance_id] = new.member_id
            self._own(new)

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assignment.assigned, member.assignment.pending_revocation):
            for topic, partitions in assignment.items():
                epochs = self.partition_epochs.get(topic, {})
                for p in partitions:
                    if epochs.pop(p, None) != member.epoch:
                        raise InconsistentRecords(
                            f"group {self.group_id}: {topic}-{p} was not owned by {member.member_id} at {member.epoch}"
                        )
                if not epochs:
                    self.partition_epochs.pop(topic, None)

    def _own(self, member: ConsumerMember) -> None:
        for assignment in (member.assignment.assigned, member.assignment.pending_revocation):
            for topic, partitions in assignment.items():
                epochs = self.partition_epochs.setdefault(topic, {})
                for p in partitions:
                    if p in epochs:
                        raise InconsistentRecords(
                            f"group {self.group_id}: {topic}-{p} given to {member.member_id} "
                            f"while owned at epoch {epochs[p]}"
                        )
                    epochs[p] = member.epoch
