"""The consumer group protocol (KIP-848) for the groups of this coordinator:
ConsumerGroupHeartbeat, the members' sessions and rebalance timeouts, and the changes of a
group's type between ``classic`` and ``consumer``.

Theory of operation. A member heartbeats every ``group.consumer.heartbeat.interval.ms``
(the coordinator says how often, in every answer). Each heartbeat may carry what changed
for the member (its subscription, its rebalance timeout, the assignor it prefers) and the
partitions it owns. The coordinator then, as Kafka's GroupMetadataManager does:

1. updates the member; a new member or a changed subscription (names, regex, or what the
   subscribed topics are: their partition counts, what a regex matches) bumps the *group
   epoch*;
2. if the group epoch is ahead of the target assignment's, runs the group's server assignor
   (``uniform`` or ``range``) over every member to get a new *target assignment* at the
   group epoch;
3. moves this member towards its target (:mod:`.reconciliation`): first revoking what it
   must give up, then handing it what nobody else owns any more. Other members pick up
   their new target at their own next heartbeat: no member waits for another, and a member
   keeps consuming what it keeps.

Every decision is a list of records (:mod:`.consumer_records`) applied to the group with
``ConsumerGroup.replay`` and written to ``__consumer_offsets`` as one batch; the answer
goes out once they are in the log. If the write fails, the group is put back as it was and
the member gets the error.

A member is removed (*fenced*) when it leaves (epoch -1), when its session expires
(``group.consumer.session.timeout.ms`` without a heartbeat), or when it does not revoke
within its rebalance timeout. A static member (``group.instance.id``) that leaves with
epoch -2 keeps its partitions, unowned by anyone else, until it returns with a new member
id or its session expires.

Timer keys: ``("consumer-session", group, member)``, ``("consumer-rebalance", group,
member)``, and for members that joined with JoinGroup (``consumer_classic``)
``("consumer-join", group, member)`` and ``("consumer-sync", group, member)``.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from tributary.broker.group.consumer_assignors import SERVER_ASSIGNORS, MemberSpec
from tributary.broker.group.consumer_group import (
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    TopicImage,
)
from tributary.broker.group.consumer_records import (
    Assignment,
    ConsumerKey,
    ConsumerValue,
    CurrentAssignmentKey,
    GroupEpochKey,
    GroupEpochValue,
    MemberMetadataKey,
    SubscriptionMetadataKey,
    SubscriptionMetadataValue,
    TargetAssignmentEpochKey,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TopicMetadata,
    encode_key,
    encode_value,
)
from tributary.broker.group.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResult
from tributary.broker.group.reconciliation import MemberState, MustRejoin, Reconciled, reconcile
from tributary.broker.group.runtime import Continuation, Runtime, consumer_store_error
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

ConsumerRecord = tuple[ConsumerKey, ConsumerValue | None]
RawRecord = tuple[bytes, bytes | None]


class Refused(Exception):
    """A request answered with an error, before anything changed."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


@dataclass
class Change:
    """What one request does to a group, in the order written: raw records first (a classic
    group's tombstone when the group changes type), then consumer records applied already
    (those that created the group it converts to), then the consumer records this change
    applies, then raw records again (a classic group's metadata, on a downgrade)."""

    group_id: str
    records: list[ConsumerRecord] = field(default_factory=list)
    before: list[RawRecord] = field(default_factory=list)
    applied: list[ConsumerRecord] = field(default_factory=list)
    after: list[RawRecord] = field(default_factory=list)

    def add(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        self.records.append((key, value))

    def remove_member(self, member_id: str) -> None:
        """Kafka's order: the current assignment, the target, then the member itself."""
        group = self.group_id
        self.add(CurrentAssignmentKey(group, member_id), None)
        self.add(TargetAssignmentMemberKey(group, member_id), None)
        self.add(MemberMetadataKey(group, member_id), None)

    def encoded(self) -> list[RawRecord]:
        body = [(encode_key(k), encode_value(v) if v is not None else None) for k, v in (*self.applied, *self.records)]
        return [*self.before, *body, *self.after]

    def __bool__(self) -> bool:
        return bool(self.records or self.before or self.applied or self.after)


def unknown_member(member_id: str, group_id: str) -> Refused:
    return Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def _owned_subset(owned: Mapping[uuid.UUID, frozenset[int]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(partitions <= assigned.get(topic, frozenset()) for topic, partitions in owned.items() if partitions)


class ConsumerGroups:
    """The consumer groups of this coordinator and the protocol that runs them (see the
    module docstring). The coordinator owns the dict of classic groups; group type changes
    go through :class:`~.consumer_classic.Migration`, which this calls back."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.config = runtime.config
        self.groups: dict[str, ConsumerGroup] = {}
        self.topics = TopicImage()
        #: (group, member) -> the member epoch its rebalance timeout was set at.
        self._rebalance_epochs: dict[tuple[str, str], int] = {}
        self._patterns: dict[str, re.Pattern[str] | None] = {}
        #: Group epoch bumps since start (the broker's rebalance metrics count them).
        self.epoch_bumps = 0

    @property
    def default_assignor(self) -> str:
        return self.config.consumer_assignors[0]

    # --- requests ------------------------------------------------------------------------------

    def validate(self, req: ConsumerHeartbeatRequest) -> None:
        """Kafka 4.0's throwIfConsumerGroupHeartbeatRequestIsInvalid."""

        def invalid(message: str) -> Refused:
            return Refused(ErrorCode.INVALID_REQUEST, message)

        # From v1 the client names itself (KIP-1082); a v0 client joins without an id.
        v0_join = req.api_version == 0 and req.member_epoch == 0
        if not req.member_id.strip() and not (v0_join and not req.member_id):
            raise invalid("MemberId can't be empty.")
        if not req.group_id.strip():
            raise invalid("GroupId can't be empty.")
        if _blank(req.instance_id):
            raise invalid("InstanceId can't be empty.")
        if _blank(req.rack_id):
            raise invalid("RackId can't be empty.")
        message = self._epoch_problem(req)
        if message is not None:
            raise invalid(message)
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            raise Refused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.config.consumer_assignors)}.",
            )
        if req.subscribed_topic_regex:
            self.compile(req.subscribed_topic_regex)

    @staticmethod
    def _epoch_problem(req: ConsumerHeartbeatRequest) -> str | None:
        """What the request lacks for its epoch: a join must say everything."""
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if req.owned is None or any(req.owned.values()):
                return "TopicPartitions must be empty when (re-)joining."
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return "InstanceId can't be null."
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            return "MemberEpoch is invalid."
        return None

    def compile(self, regex: str) -> re.Pattern[str]:
        """The regex of a subscription. Kafka compiles RE2/J; this is Python's ``re``, matched
        against whole topic names (``fullmatch``), which agrees on the patterns topics use."""
        if regex not in self._patterns:
            try:
                self._patterns[regex] = re.compile(regex)
            except re.error as exc:
                self._patterns[regex] = None
                log.info("invalid subscription regex %r: %s", regex, exc)
        pattern = self._patterns[regex]
        if pattern is None:
            raise Refused(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{regex}` is not a valid regular expression.",
            )
        return pattern

    def heartbeat(self, group: ConsumerGroup, req: ConsumerHeartbeatRequest, change: Change) -> ConsumerHeartbeatResult:
        """A regular heartbeat (epoch >= 0) to ``group``, which exists (or is new and
        registered, for epoch 0). Records go to ``change``; raises :class:`Refused`."""
        if (
            len(group.members) >= self.config.consumer_max_size
            and req.member_id not in group.members
            and (req.instance_id is None or group.static_member(req.instance_id) is None)
        ):
            raise Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} members.",
            )
        member_id = req.member_id or str(uuid.uuid4())  # v0: the coordinator names the member
        member, replaced = self._member_for(group, req, member_id, change)
        metadata = member.metadata
        updated = replace(
            member,
            metadata=replace(
                metadata,
                instance_id=req.instance_id if req.instance_id is not None else metadata.instance_id,
                rack_id=req.rack_id if req.rack_id is not None else metadata.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else metadata.rebalance_timeout_ms,
                server_assignor=req.server_assignor if req.server_assignor is not None else metadata.server_assignor,
                subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names)))
                if req.subscribed_topic_names is not None
                else metadata.subscribed_topic_names,
                subscribed_topic_regex=req.subscribed_topic_regex
                if req.subscribed_topic_regex is not None
                else metadata.subscribed_topic_regex,
                client_id=req.client_id,
                client_host=req.client_host,
                classic=None,
            ),
        )
        updated = self.update_member(group, member, updated, replaced=replaced, owned=req.owned, change=change)
        self.schedule_session(group, updated.member_id, self.config.consumer_session_timeout_ms)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        changed = updated.assignment.assigned != member.assignment.assigned
        return ConsumerHeartbeatResult(
            ErrorCode.NONE,
            member_id=updated.member_id,
            member_epoch=updated.epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
            assignment=updated.assignment.assigned if full or changed else None,
        )

    def _member_for(
        self, group: ConsumerGroup, req: ConsumerHeartbeatRequest, member_id: str, change: Change
    ) -> tuple[ConsumerMember, str | None]:
        """The member the heartbeat is from (new when joining), and the member id a
        returning static member replaces. Validates its epoch (FENCED_MEMBER_EPOCH)."""
        joining = req.member_epoch == 0
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise unknown_member(member_id, group.group_id)
                log.info("group %s: member %s joins with the consumer protocol", group.group_id, member_id)
                return ConsumerMember(member_id), None
            self._check_epoch(member, req)
            return member, None
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None:
                log.info("group %s: static member %s (%s) joins", group.group_id, member_id, req.instance_id)
                return ConsumerMember(member_id), None
            if existing.member_id == member_id:
                self._check_epoch(existing, req)
                return existing, None
            if not existing.uses_classic and existing.epoch != STATIC_LEAVE_EPOCH:
                raise Refused(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join the group because "
                    f"the instance id is owned by {existing.member_id} member.",
                )
            # The instance comes back with a new member id: it takes its predecessor's place,
            # partitions included, at epoch 0 (so it reconciles from what it had).
            log.info("group %s: static member %s replaces %s (%s)", group.group_id, member_id, existing.member_id,
                     req.instance_id)  # fmt: skip
            successor = ConsumerMember(
                member_id,
                existing.metadata,
                Reconciled(0, 0, existing.state, existing.assignment.assigned, {}),
            )
            self.replace_member(group, existing, successor, change)
            return successor, existing.member_id
        if existing is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise Refused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        self._check_epoch(existing, req)
        return existing, None

    def _check_epoch(self, member: ConsumerMember, req: ConsumerHeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member ahead of the coordinator,
        or behind by more than the one epoch whose answer may have been lost, must rejoin."""
        received, known = req.member_epoch, member.epoch
        lost_answer = received == member.assignment.previous_member_epoch and _owned_subset(
            req.owned, member.assignment.assigned
        )
        if received > known or (received < known and not lost_answer):
            raise Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a {'greater' if received > known else 'smaller'} member epoch "
                f"({received}) than the one known by the group coordinator ({known}). The member must abandon "
                "all its partitions and rejoin.",
            )

    def replace_member(self, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember, change: Change) -> None:
        """Records that swap a static member's incarnation (Kafka's replaceMember). The old
        member's timers stay: once it is gone they find nothing to do."""
        change.remove_member(old.member_id)
        gid = group.group_id
        change.add(MemberMetadataKey(gid, new.member_id), new.metadata)
        target = group.targets.get(old.member_id, {})
        change.add(TargetAssignmentMemberKey(gid, new.member_id), TargetAssignmentMemberValue(target))
        change.add(CurrentAssignmentKey(gid, new.member_id), new.assignment_value())

    # --- the three steps of a heartbeat ---------------------------------------------------------

    def update_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        *,
        replaced: str | None,
        owned: Mapping[uuid.UUID, frozenset[int]] | None,
        change: Change,
    ) -> ConsumerMember:
        """Steps 1-3 for ``updated`` (the member as this request leaves it; ``member`` as it
        was): its records, the group epoch, the target assignment, its reconciliation."""
        gid = group.group_id
        is_new = member.member_id not in group.members
        bump = False
        if updated.metadata != member.metadata or is_new:
            change.add(MemberMetadataKey(gid, updated.member_id), updated.metadata)
            bump = (
                is_new
                or updated.metadata.subscribed_topic_names != member.metadata.subscribed_topic_names
                or (updated.metadata.subscribed_topic_regex or "") != (member.metadata.subscribed_topic_regex or "")
            )
        # The members once this request is applied.
        members = {mid: m for mid, m in group.members.items() if mid not in (replaced, updated.member_id)}
        members[updated.member_id] = updated
        group_epoch = group.group_epoch
        metadata = group.subscription_metadata
        if bump or group.metadata_stale:
            self.resolve_regexes(group, members.values())
            metadata = self.subscription_metadata(group, members.values())
            group.metadata_stale = False
            if metadata != group.subscription_metadata:
                change.add(SubscriptionMetadataKey(gid), SubscriptionMetadataValue(tuple(metadata.values())))
                bump = True
            if bump:
                group_epoch += 1
                change.add(GroupEpochKey(gid), GroupEpochValue(group_epoch))
                self.epoch_bumps += 1
                log.info("group %s: epoch %d", gid, group_epoch)
        if group_epoch > group.assignment_epoch:
            targets = self.compute_target(
                group, group_epoch, members, metadata=metadata, replaced=replaced, change=change
            )
            target_epoch, target = group_epoch, targets.get(updated.member_id, {})
        else:
            target_epoch = group.assignment_epoch
            target = group.targets.get(updated.member_id, group.targets.get(replaced or "", {}))
        return self.reconcile(group, updated, target_epoch, target=target, owned=owned, change=change)

    def reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        target_epoch: int,
        *,
        target: Assignment,
        owned: Mapping[uuid.UUID, frozenset[int]] | None,
        change: Change,
    ) -> ConsumerMember:
        if member.assignment.is_reconciled_to(target_epoch):
            return member
        try:
            moved = reconcile(member.assignment, target_epoch, target, group.partition_epoch, owned)
        except MustRejoin as exc:
            raise Refused(ErrorCode.FENCED_MEMBER_EPOCH, str(exc)) from None
        if moved == member.assignment:
            return member
        updated = replace(member, assignment=moved)
        change.add(CurrentAssignmentKey(group.group_id, member.member_id), updated.assignment_value())
        if not member.uses_classic:
            # A member that must revoke has its rebalance timeout to do so.
            if moved.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_rebalance(group, updated)
            else:
                self.cancel_rebalance(group.group_id, member.member_id)
        return updated

    def resolve_regexes(self, group: ConsumerGroup, members: Iterable[ConsumerMember]) -> None:
        """What each regex subscription matches among the current topics (internal topics
        never match, as Kafka's clients exclude them)."""
        names = [n for n in self.topics.by_name if not n.startswith("__")]
        resolved = {}
        for regex in {m.metadata.subscribed_topic_regex for m in members if m.metadata.subscribed_topic_regex}:
            pattern = self._patterns.get(regex) or self.compile(regex)
            resolved[regex] = frozenset(n for n in names if pattern.fullmatch(n))
        group.resolved_regexes = resolved

    def subscription_metadata(
        self, group: ConsumerGroup, members: Iterable[ConsumerMember]
    ) -> dict[str, TopicMetadata]:
        """The subscribed topics that exist, in name order."""
        topics = self.topics.by_name
        return {name: topics[name] for name in sorted(group.subscribed_topics(members)) if name in topics}

    def compute_target(
        self,
        group: ConsumerGroup,
        epoch: int,
        members: Mapping[str, ConsumerMember],
        *,
        metadata: Mapping[str, TopicMetadata],
        replaced: str | None,
        change: Change,
    ) -> dict[str, Assignment]:
        """A new target assignment at ``epoch``: records for the members whose share
        changed, then the target's epoch (Kafka's TargetAssignmentBuilder)."""
        ids = {name: meta.topic_id for name, meta in metadata.items()}
        specs = {}
        for member_id, member in members.items():
            previous = group.targets.get(member_id)
            if previous is None and replaced is not None and member.instance_id is not None:
                previous = group.targets.get(replaced)
            specs[member_id] = MemberSpec(
                topics=frozenset(ids[n] for n in group.member_topics(member) if n in ids),
                instance_id=member.instance_id,
                current=previous or {},
            )
        name = group.preferred_assignor(members.values()) or self.default_assignor
        targets = SERVER_ASSIGNORS[name](specs, {meta.topic_id: meta.partitions for meta in metadata.values()})
        gid = group.group_id
        for member_id in members:
            target = targets.get(member_id, {})
            if group.targets.get(member_id) != target:
                change.add(TargetAssignmentMemberKey(gid, member_id), TargetAssignmentMemberValue(target))
        change.add(TargetAssignmentEpochKey(gid), TargetAssignmentEpochValue(epoch))
        log.info("group %s: target assignment for epoch %d computed with %s", gid, epoch, name)
        return targets

    # --- leaving and fencing -------------------------------------------------------------------

    def leave(
        self,
        group: ConsumerGroup,
        req: ConsumerHeartbeatRequest,
        change: Change,
        fence: Callable[[ConsumerGroup, ConsumerMember, Change], None],
    ) -> ConsumerHeartbeatResult:
        """Epoch -1 (leave for good) or -2 (a static member that will be back); ``fence``
        removes a member (the coordinator's, which may downgrade the group)."""
        result = ConsumerHeartbeatResult(ErrorCode.NONE, member_id=req.member_id, member_epoch=req.member_epoch)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise unknown_member(req.member_id, group.group_id)
            log.info("group %s: member %s left", group.group_id, member.member_id)
            fence(group, member, change)
            return result
        member = group.static_member(req.instance_id)
        if member is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise Refused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                f"{member.member_id}.",
            )
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            log.info("group %s: static member %s (%s) left for now", group.group_id, member.member_id, req.instance_id)
            away = Reconciled(STATIC_LEAVE_EPOCH, member.assignment.previous_member_epoch, member.state,
                              member.assignment.assigned, {})  # fmt: skip
            away_value = replace(member, assignment=away).assignment_value()
            change.add(CurrentAssignmentKey(group.group_id, member.member_id), away_value)
            return ConsumerHeartbeatResult(ErrorCode.NONE, member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH)
        log.info("group %s: static member %s (%s) left", group.group_id, member.member_id, req.instance_id)
        fence(group, member, change)
        return result

    def fence(self, group: ConsumerGroup, member: ConsumerMember, change: Change) -> None:
        """Remove a member (Kafka's consumerGroupFenceMember): its records go, the
        subscription metadata is recomputed without it, and the group epoch moves on. A
        downgrade to a classic group is the coordinator's business (see ``consumer_classic``)."""
        gid = group.group_id
        change.remove_member(member.member_id)
        others = [m for mid, m in group.members.items() if mid != member.member_id]
        self.resolve_regexes(group, others)
        metadata = self.subscription_metadata(group, others)
        if metadata != group.subscription_metadata:
            change.add(SubscriptionMetadataKey(gid), SubscriptionMetadataValue(tuple(metadata.values())))
        change.add(GroupEpochKey(gid), GroupEpochValue(group.group_epoch + 1))
        self.epoch_bumps += 1
        self.cancel_timers(gid, member.member_id)

    # --- timers ---------------------------------------------------------------------------------

    def schedule_session(self, group: ConsumerGroup, member_id: str, timeout_ms: int) -> None:
        self.rt.timers.schedule(("consumer-session", group.group_id, member_id), self.rt.now_ms + timeout_ms)

    def schedule_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        timeout = max(member.rebalance_timeout_ms, 0)
        self._rebalance_epochs[group.group_id, member.member_id] = member.epoch
        self.rt.timers.schedule(("consumer-rebalance", group.group_id, member.member_id), self.rt.now_ms + timeout)

    def cancel_rebalance(self, group_id: str, member_id: str) -> None:
        self._rebalance_epochs.pop((group_id, member_id), None)
        self.rt.timers.cancel(("consumer-rebalance", group_id, member_id))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("consumer-session", "consumer-join", "consumer-sync"):
            self.rt.timers.cancel((kind, group_id, member_id))
        self.cancel_rebalance(group_id, member_id)

    def rebalance_epoch(self, group_id: str, member_id: str) -> int | None:
        return self._rebalance_epochs.pop((group_id, member_id), None)

    def loaded(self, group: ConsumerGroup) -> None:
        """A group read back from the log: sessions start from now, revocations in
        progress get their rebalance timeout again, and the subscription is checked against
        the current topics at the next heartbeat."""
        group.metadata_stale = True
        for member in group.members.values():
            classic = member.metadata.classic
            timeout = classic.session_timeout_ms if classic is not None else self.config.consumer_session_timeout_ms
            self.schedule_session(group, member.member_id, timeout)
            if classic is None and member.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_rebalance(group, member)

    def unload(self, group: ConsumerGroup) -> None:
        for member_id in group.members:
            self.cancel_timers(group.group_id, member_id)
        group.dead = True

    # --- persistence ------------------------------------------------------------------------------

    def apply(self, group: ConsumerGroup, change: Change) -> None:
        for key, value in change.records:
            group.replay(key, value)

    def write(self, partition: int, change: Change, then: Continuation) -> None:
        self.rt.write(partition, change.encoded(), then)


def store_error(error: ErrorCode) -> ErrorCode:
    return consumer_store_error(error)
