"""Classic and consumer members in one group, and groups changing type, as Kafka 4.0 runs
them (its "online migration" of KIP-848).

- **Upgrade.** A ConsumerGroupHeartbeat joining (epoch 0) a group that is classic becomes a
  consumer group: at once if the classic group is Empty, and, if it has members and
  ``group.consumer.migration.policy`` allows upgrades, by converting it: every classic
  member becomes a member of the consumer group that keeps using JoinGroup, SyncGroup and
  Heartbeat, at the group's generation as its epoch, owning what the classic group last
  assigned it. Its waiting JoinGroup/SyncGroup requests are answered REBALANCE_IN_PROGRESS,
  so they join again, now served from the consumer group's state.
- **Classic members of a consumer group** get their assignment from the coordinator's
  target assignment, through the classic APIs: JoinGroup is answered at once (no waiting
  for the others) with their member epoch as the generation and no leader duty; SyncGroup
  returns their current assignment as a ConsumerProtocolAssignment; Heartbeat answers
  REBALANCE_IN_PROGRESS whenever they should join again (the group epoch moved, they must
  revoke, or a partition they wait for is free now). Joining again with fewer owned
  partitions in the subscription is how they acknowledge a revocation. A member that does
  not join within its rebalance timeout after being told to, or does not sync after its
  join, is removed.
- **Downgrade.** When the last member using ConsumerGroupHeartbeat leaves a group whose
  other members all use JoinGroup, and the policy allows downgrades, the group becomes a
  classic group with those members and their assignments, and rebalances; an Empty
  consumer group becomes classic when a JoinGroup arrives.

Committed offsets carry over every change. What Kafka 4.0 does and this does not: a static
classic member replacing the last consumer-protocol member does not downgrade the group at
once (it does when a member next leaves), and the classic group size limit
(``group.max.size``) is not a setting here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from tributary.broker.group.consumer_group import ConsumerGroup, ConsumerMember
from tributary.broker.group.consumer_membership import Change, ConsumerGroups, ConsumerRecord, Refused, unknown_member
from tributary.broker.group.consumer_records import (
    Assignment,
    ClassicMemberMetadata,
    CurrentAssignmentKey,
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
)
from tributary.broker.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from tributary.broker.group.member import Member, Ticket
from tributary.broker.group.membership import Membership
from tributary.broker.group.messages import (
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    SyncRequest,
    SyncResult,
)
from tributary.broker.group.reconciliation import MemberState, Reconciled
from tributary.broker.group.records import encode_group_key, encode_group_value
from tributary.broker.group.runtime import Runtime, consumer_store_error
from tributary.protocol import codec
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from tributary.protocol.supported import CONSUMER_PROTOCOL_VERSIONS

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass
class _Saved:
    """A group as it was before a request changed it, to put back if the write fails."""

    consumer: ConsumerGroup | None
    consumer_copy: ConsumerGroup | None
    classic: Group | None


@dataclass(frozen=True, slots=True)
class ClassicSubscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack: str | None


def _version(metadata: bytes) -> int:
    if len(metadata) < 2:
        raise ProtocolError("no version")
    version = int.from_bytes(metadata[:2], "big", signed=True)
    return min(max(version, 0), CONSUMER_PROTOCOL_VERSIONS.hi or 0)


def parse_subscription(metadata: bytes) -> ClassicSubscription:
    sub = codec.decode(ConsumerProtocolSubscription, metadata[2:], _version(metadata))
    owned: dict[str, frozenset[int]] = {}
    for tp in sub.owned_partitions:
        owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return ClassicSubscription(tuple(sub.topics), owned, sub.rack_id)


def parse_assignment(data: bytes) -> dict[str, frozenset[int]]:
    if not data:
        return {}
    assignment = codec.decode(ConsumerProtocolAssignment, data[2:], _version(data))
    result: dict[str, frozenset[int]] = {}
    for tp in assignment.assigned_partitions:
        result[tp.topic] = result.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return result


class Migration:
    """Runs requests that may touch both kinds of group (see the module docstring)."""

    def __init__(
        self,
        runtime: Runtime,
        classic: Membership,
        classic_groups: dict[str, Group],
        consumers: ConsumerGroups,
        partition_for: Callable[[str], int],
    ) -> None:
        self.rt = runtime
        self.config = runtime.config
        self.classic = classic
        self.classic_groups = classic_groups
        self.consumers = consumers
        self.partition_for = partition_for

    # --- one request, all or nothing ------------------------------------------------------------

    def transact(
        self,
        group_id: str,
        op: Callable[[Change], R],
        done: Callable[[R | None, ErrorCode, str | None], None],
    ) -> None:
        """Run ``op``; apply its records to the consumer group and write them; ``done`` gets
        the result once they are in the log (or the error, with the group put back)."""
        saved = _Saved(
            self.consumers.groups.get(group_id),
            g.snapshot() if (g := self.consumers.groups.get(group_id)) is not None else None,
            self.classic_groups.get(group_id),
        )
        change = Change(group_id)
        try:
            result = op(change)
        except Refused as exc:
            self._restore(group_id, saved)
            done(None, exc.error, exc.message)
            return
        group = self.consumers.groups.get(group_id)
        if group is not None:
            self.consumers.apply(group, change)
            if group.dead:
                del self.consumers.groups[group_id]
        if not change:
            done(result, ErrorCode.NONE, None)
            return

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                done(result, ErrorCode.NONE, None)
                return
            log.warning("group %s: writing its records failed: %s", group_id, error.name)
            self._restore(group_id, saved)
            done(None, consumer_store_error(error), None)

        self.rt.write(self.partition_for(group_id), change.encoded(), written)

    def _restore(self, group_id: str, saved: _Saved) -> None:
        if saved.consumer is None or saved.consumer_copy is None:
            self.consumers.groups.pop(group_id, None)
        else:
            saved.consumer.restore(saved.consumer_copy)
            self.consumers.groups[group_id] = saved.consumer
        if saved.classic is None:
            self.classic_groups.pop(group_id, None)
        elif self.classic_groups.get(group_id) is not saved.classic:
            self.classic_groups[group_id] = saved.classic
            self.classic.revive(saved.classic)

    # --- which group a request joins ------------------------------------------------------------

    def consumer_group_to_join(self, group_id: str, change: Change) -> ConsumerGroup:
        """The consumer group a ConsumerGroupHeartbeat with epoch 0 joins: the existing one,
        a new one, or the classic group of that id converted."""
        group = self.consumers.groups.get(group_id)
        if group is not None:
            return group
        classic = self.classic_groups.get(group_id)
        partition = self.partition_for(group_id)
        if classic is None:
            group = self.consumers.groups[group_id] = ConsumerGroup(group_id, partition)
            return group
        if classic.is_(GroupState.EMPTY):
            log.info("group %s: the empty classic group becomes a consumer group", group_id)
            change.before.append((encode_group_key(group_id), None))
            self.classic.retire(classic, ErrorCode.REBALANCE_IN_PROGRESS)
            del self.classic_groups[group_id]
            group = self.consumers.groups[group_id] = ConsumerGroup(group_id, partition, classic.offsets)
            group.metadata_stale = True
            return group
        if not self.config.upgrade_allowed:
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {group_id} to consumer group because the online upgrade is disabled.",
            )
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {group_id} to consumer group because the group does not use the "
                "consumer embedded protocol.",
            )
        if len(classic.members) > self.config.consumer_max_size:
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {group_id} to consumer group because the group size exceeds the "
                "consumer group maximum size.",
            )
        return self._upgrade(classic, change)

    def _upgrade(self, classic: Group, change: Change) -> ConsumerGroup:
        group_id = classic.group_id
        ids = {name: meta.topic_id for name, meta in self.consumers.topics.by_name.items()}
        epoch = classic.generation
        members = []
        for m in classic.members.values():
            try:
                sub = parse_subscription(m.metadata(classic.protocol_name or "")) if classic.protocol_name else None
                assigned = parse_assignment(m.assignment)
            except (ProtocolError, KeyError) as exc:
                raise Refused(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade the classic group {group_id} to consumer group because the embedded consumer "
                    f"protocol is malformed: {exc}.",
                ) from None
            metadata = MemberMetadataValue(
                instance_id=m.group_instance_id,
                rack_id=sub.rack if sub else None,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(sub.topics))) if sub else (),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
            )
            by_id = {ids[t]: ps for t, ps in assigned.items() if t in ids and ps}
            reconciled = Reconciled(epoch, epoch, MemberState.STABLE, by_id, {})
            members.append(ConsumerMember(m.member_id, metadata, reconciled))
        group = ConsumerGroup(group_id, classic.partition, classic.offsets)
        records: list[ConsumerRecord] = [(MemberMetadataKey(group_id, m.member_id), m.metadata) for m in members]
        records.append((GroupEpochKey(group_id), GroupEpochValue(epoch)))
        records += [
            (TargetAssignmentMemberKey(group_id, m.member_id), TargetAssignmentMemberValue(m.assignment.assigned))
            for m in members
        ]
        records.append((TargetAssignmentEpochKey(group_id), TargetAssignmentEpochValue(epoch)))
        records += [(CurrentAssignmentKey(group_id, m.member_id), m.assignment_value()) for m in members]
        for key, value in records:
            group.replay(key, value)
        group.metadata_stale = True
        change.before.append((encode_group_key(group_id), None))
        change.applied += records
        self.classic.retire(classic, ErrorCode.REBALANCE_IN_PROGRESS)
        del self.classic_groups[group_id]
        self.consumers.groups[group_id] = group
        for new in members:
            assert new.metadata.classic is not None
            self.consumers.schedule_session(group, new.member_id, new.metadata.classic.session_timeout_ms)
        log.info("group %s: upgraded from classic to consumer at epoch %d with %d members", group_id, epoch,
                 len(members))  # fmt: skip
        return group

    def classic_group_to_join(self, group_id: str) -> None:
        """A JoinGroup for an Empty consumer group: the group becomes classic (its
        tombstones are written; its offsets carry over)."""
        group = self.consumers.groups.get(group_id)
        if group is None or group.members:
            return
        log.info("group %s: the empty consumer group becomes a classic group", group_id)
        self.rt.write(group.partition, Change(group_id, records=tombstones(group)).encoded())
        self.consumers.unload(group)
        del self.consumers.groups[group_id]
        self.classic_groups[group_id] = Group(group_id, group.partition, self.rt.now_ms)
        self.classic_groups[group_id].offsets = group.offsets

    # --- removing members -------------------------------------------------------------------------

    def fence(self, group: ConsumerGroup, member: ConsumerMember, change: Change) -> None:
        """Remove a member; if only JoinGroup members remain, maybe downgrade (Kafka's
        validateOnlineDowngradeWithFencedMember)."""
        others = [m for mid, m in group.members.items() if mid != member.member_id]
        if not member.uses_classic and others and all(m.uses_classic for m in others) and self.config.downgrade_allowed:
            self._downgrade(group, member, change)
        else:
            self.consumers.fence(group, member, change)

    def _downgrade(self, group: ConsumerGroup, leaving: ConsumerMember, change: Change) -> None:
        group_id = group.group_id
        names = {meta.topic_id: name for name, meta in self.consumers.topics.by_name.items()}
        classic = Group(group_id, group.partition, self.rt.now_ms)
        classic.offsets = group.offsets
        classic.generation = group.group_epoch
        assignments: dict[str, bytes] = {}
        for m in group.members.values():
            if m.member_id == leaving.member_id or m.metadata.classic is None:
                continue
            meta = m.metadata.classic
            assignment = classic_assignment(m, m.assignment.assigned, names)
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.metadata.client_id,
                client_host=m.metadata.client_host,
                rebalance_timeout_ms=max(m.rebalance_timeout_ms, 0),
                session_timeout_ms=meta.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=meta.protocols,
                assignment=assignment,
            )
            classic.add(member, None)
            assignments[m.member_id] = assignment
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        classic.protocol_name = classic.select_protocol()
        classic.state = GroupState.STABLE
        change.records += tombstones(group)
        change.after.append((encode_group_key(group_id), encode_group_value(classic.to_stored(assignments))))
        self.consumers.unload(group)
        self.consumers.groups.pop(group_id, None)
        self.classic_groups[group_id] = classic
        self.classic.loaded(classic)
        self.classic.rebalance(classic, "the last member using the consumer protocol left: downgraded to classic")
        log.info("group %s: downgraded from consumer to classic with %d members", group_id, len(classic.members))

    # --- classic members of a consumer group -----------------------------------------------------

    def join(self, group: ConsumerGroup, ticket: Ticket, req: JoinRequest, change: Change) -> JoinResult | None:
        """JoinGroup into a non-empty consumer group (Kafka's classicGroupJoinToConsumerGroup).
        Returns the answer, sent once the change is written (None: answered already)."""
        member_id = req.member_id or str(uuid.uuid4())
        if (
            len(group.members) >= self.config.consumer_max_size
            and member_id not in group.members
            and (req.group_instance_id is None or group.static_member(req.group_instance_id) is None)
        ):
            raise Refused(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not group.supports_classic_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
        if not req.member_id and req.group_instance_id is None and req.require_known_member_id:
            self.rt.reply(ticket, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
            return None
        try:
            sub = parse_subscription(req.protocols[0][1])
        except (ProtocolError, IndexError) as exc:
            raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"malformed subscription: {exc}") from None
        member, replaced = self._classic_member(group, req, member_id, change)
        ids = {name: meta.topic_id for name, meta in self.consumers.topics.by_name.items()}
        updated = replace(
            member,
            metadata=replace(
                member.metadata,
                instance_id=req.group_instance_id,
                rack_id=sub.rack if sub.rack else member.metadata.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms,
                subscribed_topic_names=tuple(sorted(set(sub.topics))),
                client_id=req.client_id,
                client_host=req.client_host,
                classic=ClassicMemberMetadata(req.session_timeout_ms, req.protocols),
            ),
        )
        owned = {ids[t]: ps for t, ps in sub.owned.items() if t in ids}
        updated = self.consumers.update_member(group, member, updated, replaced=replaced, owned=owned, change=change)
        self.rt.timers.cancel(("consumer-join", group.group_id, updated.member_id))
        self.consumers.schedule_session(group, updated.member_id, req.session_timeout_ms)
        self.rt.timers.schedule(
            ("consumer-sync", group.group_id, updated.member_id), self.rt.now_ms + max(req.rebalance_timeout_ms, 0)
        )
        return JoinResult(
            ErrorCode.NONE,
            updated.member_id,
            updated.epoch,
            CONSUMER_PROTOCOL_TYPE,
            req.protocols[0][0],
            "",
        )

    def _classic_member(
        self, group: ConsumerGroup, req: JoinRequest, member_id: str, change: Change
    ) -> tuple[ConsumerMember, str | None]:
        if req.group_instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                log.info("group %s: member %s joins with the classic protocol", group.group_id, member_id)
                return ConsumerMember(member_id), None
            if not member.uses_classic:
                raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} does not use the classic protocol.")
            return member, None
        existing = group.static_member(req.group_instance_id)
        if existing is None:
            return ConsumerMember(member_id), None
        if req.member_id and existing.member_id == req.member_id:
            return existing, None
        if req.member_id:
            raise Refused(ErrorCode.FENCED_INSTANCE_ID)
        successor = ConsumerMember(
            member_id, existing.metadata, Reconciled(0, 0, existing.state, existing.assignment.assigned, {})
        )
        self.consumers.replace_member(group, existing, successor, change)
        return successor, existing.member_id

    def _member_of(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember, and the member must use the classic protocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise unknown_member(member_id, group.group_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise Refused(ErrorCode.FENCED_INSTANCE_ID)
        if not member.uses_classic:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
        return member

    def sync(self, group: ConsumerGroup, req: SyncRequest) -> SyncResult:
        member = self._member_of(group, req.member_id, req.group_instance_id)
        assert member.metadata.classic is not None
        if req.generation_id != member.epoch:
            raise Refused(ErrorCode.ILLEGAL_GENERATION)
        protocol = member.metadata.classic.protocols[0][0]
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            req.protocol_name is not None and req.protocol_name != protocol
        ):
            raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        self._check_no_rebalance(group, member)
        self.rt.timers.cancel(("consumer-sync", group.group_id, member.member_id))
        self.consumers.schedule_session(group, member.member_id, member.metadata.classic.session_timeout_ms)
        names = {meta.topic_id: name for name, meta in self.consumers.topics.by_name.items()}
        assignment = classic_assignment(member, member.assignment.assigned, names)
        return SyncResult(ErrorCode.NONE, assignment, CONSUMER_PROTOCOL_TYPE, protocol)

    def _check_no_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A member behind the group epoch must join again (unless it is already revoking)."""
        if group.group_epoch > member.epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(group, member)
            raise Refused(ErrorCode.REBALANCE_IN_PROGRESS)

    def _schedule_join_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        key = ("consumer-join", group.group_id, member.member_id)
        if key not in self.rt.timers:
            self.rt.timers.schedule(key, self.rt.now_ms + max(member.rebalance_timeout_ms, 0))

    def heartbeat(self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        try:
            member = self._member_of(group, member_id, instance_id)
        except Refused as exc:
            return exc.error
        assert member.metadata.classic is not None
        if generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumers.schedule_session(group, member.member_id, member.metadata.classic.session_timeout_ms)
        if (
            member.epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(group, member))
        ):
            self._schedule_join_timeout(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _waiting_on_unreleased(self, group: ConsumerGroup, member: ConsumerMember) -> bool:
        for topic, partitions in group.targets.get(member.member_id, {}).items():
            have = member.assignment.assigned.get(topic, frozenset())
            if any(p not in have and group.partition_epoch(topic, p) != -1 for p in partitions):
                return True
        return False

    def leave(self, group: ConsumerGroup, leaving: list[LeavingMember], change: Change) -> LeaveResult:
        """LeaveGroup from classic members of a consumer group (Kafka's
        classicGroupLeaveToConsumerGroup): each is removed; the group epoch moves on once."""
        results: list[tuple[LeavingMember, ErrorCode]] = []
        gone: list[ConsumerMember] = []
        for who in leaving:
            try:
                # LeaveGroup may name a static member by its instance id alone (an admin tool).
                member = self._member_of(group, who.member_id or _member_id_of(group, who), who.group_instance_id)
            except Refused as exc:
                results.append((who, exc.error))
                continue
            log.info("group %s: classic member %s left", group.group_id, member.member_id)
            change.remove_member(member.member_id)
            self.consumers.cancel_timers(group.group_id, member.member_id)
            gone.append(member)
            results.append((who, ErrorCode.NONE))
        if gone:
            others = [m for m in group.members.values() if m not in gone]
            self.consumers.resolve_regexes(group, others)
            metadata = self.consumers.subscription_metadata(group, others)
            if metadata != group.subscription_metadata:
                change.add(SubscriptionMetadataKey(group.group_id), SubscriptionMetadataValue(tuple(metadata.values())))
            change.add(GroupEpochKey(group.group_id), GroupEpochValue(group.group_epoch + 1))
            self.consumers.epoch_bumps += 1
        return LeaveResult(ErrorCode.NONE, tuple(results))


def _member_id_of(group: ConsumerGroup, who: LeavingMember) -> str:
    member = group.static_member(who.group_instance_id) if who.group_instance_id is not None else None
    return member.member_id if member is not None else who.member_id


def tombstones(group: ConsumerGroup) -> list[ConsumerRecord]:
    """The records that delete a consumer group, in the order replay accepts them."""
    gid = group.group_id
    records: list[ConsumerRecord] = [(CurrentAssignmentKey(gid, m), None) for m in group.members]
    records += [(TargetAssignmentMemberKey(gid, m), None) for m in group.members]
    records.append((TargetAssignmentEpochKey(gid), None))
    records += [(MemberMetadataKey(gid, m), None) for m in group.members]
    records.append((SubscriptionMetadataKey(gid), None))
    records.append((GroupEpochKey(gid), None))
    return records


def classic_assignment(member: ConsumerMember, assigned: Assignment, names: Mapping[uuid.UUID, str]) -> bytes:
    """A member's partitions as the ConsumerProtocolAssignment a classic consumer reads, in
    the version of the subscription it sent."""
    version = 0
    if member.metadata.classic is not None and member.metadata.classic.protocols:
        try:
            version = _version(member.metadata.classic.protocols[0][1])
        except ProtocolError:
            version = 0
    body = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=names[t], partitions=sorted(ps))
            for t, ps in sorted(assigned.items(), key=lambda item: names.get(item[0], ""))
            if t in names
        ]
    )
    return version.to_bytes(2, "big") + codec.encode(body, version)
