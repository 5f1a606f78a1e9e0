"""Consumer group membership: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Theory of operation
-------------------
:meth:`GroupMember.run` runs three tasks for as long as the consumer is
subscribed:

- the *coordinator* loop: whenever a rejoin is wanted (the first join, a
  rebalance the coordinator announced, a subscription change) it runs one
  rebalance, as Kafka's AbstractCoordinator does: find the coordinator;
  prepare (give up partitions, see below); JoinGroup, repeated at once with
  the member id the coordinator hands out with MEMBER_ID_REQUIRED (v4+); if
  elected leader, run the assignor the group chose over every member's
  subscription and the current metadata; SyncGroup; then apply the
  assignment. Failures that only need another attempt (coordinator moved, a
  rebalance restarted, a lost connection) are retried after ``retry_backoff``.
- the *heartbeat* loop: every ``heartbeat_interval_ms`` while the member is
  in a stable generation. REBALANCE_IN_PROGRESS asks for a rejoin;
  ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID mean the group moved on without
  this member: its partitions are *lost* (handed to ``on_lost``, nothing
  committed) and it joins again. It also enforces ``max_poll_interval_ms``:
  an application that stopped polling makes the member leave the group, so
  its partitions go to members that work; it rejoins at the next poll.
- the *metadata* watcher: on every metadata refresh a pattern subscription
  is matched again, and a change rejoins; the leader also rejoins when the
  partition count of any topic the group subscribes to changes.

Rebalance protocols. The protocol is "cooperative" only when every configured
assignor is, as in Kafka (see ``ConsumerConfig.rebalance_protocol``).

- eager: before joining, the member gives up all its partitions (committing
  their offsets first when auto-commit is on) and joins owning nothing;
  afterwards it takes the whole new assignment.
- cooperative: the member keeps its partitions (and keeps consuming them)
  during the rebalance and reports them in its subscription. Afterwards it
  gives up only those missing from its new assignment (committing them first),
  takes the new ones, and, if it gave any up, rejoins at once: the leader
  withheld partitions whose owner changes, and this follow-up rebalance hands
  them to their new owners, so no partition is ever owned twice.

Giving up and taking partitions happens in the consumer (:class:`ConsumerSide`),
which runs the application's callbacks only while the application is in poll.

Static membership (``group_instance_id``): sent in JoinGroup, SyncGroup,
Heartbeat and commits; a static member sends no LeaveGroup when it closes or
stops polling, as in Kafka, so a restart within the session timeout keeps its
partitions without a rebalance.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

import trio

from tributary.client.config import ClientConfig
from tributary.client.consumer.config import ConsumerConfig
from tributary.client.consumer.errors import GroupMembershipError
from tributary.client.errors import KafkaError, error_for
from tributary.client.group.assignors import (
    ASSIGNORS,
    MemberSubscription,
    member_assignment,
    member_subscription,
    subscription_metadata,
)
from tributary.client.group.assignors.wire import assignment_bytes
from tributary.client.group.offsets import Generation
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import ClusterMetadata, TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"

_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
#: Errors after which this member cannot take part in the group at all.
_FATAL = frozenset(
    {
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"


class ConsumerSide(Protocol):
    """What membership needs from the consumer."""

    def subscription(self) -> frozenset[str]:
        """The topics to subscribe to (a pattern's current matches)."""
        ...

    def owned(self) -> list[TopicPartition]: ...

    async def revoke(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        """Give partitions up: commit them (unless lost), call back, unassign them."""
        ...

    async def rebalanced(self, revoked: list[TopicPartition], added: list[TopicPartition]) -> None:
        """Apply a new assignment: give up ``revoked``, take ``added``."""
        ...

    def away_for(self) -> float:
        """Seconds since the application last polled."""
        ...

    async def wait_for_poll(self) -> None: ...

    def match_pattern(self, metadata: ClusterMetadata) -> bool:
        """Match a pattern subscription again; True if the topics changed."""
        ...

    def pattern(self) -> str | None:
        """The regex of a pattern subscription the coordinator may match itself (the
        consumer group protocol sends it), or None: the topics are ``subscription()``'s."""
        ...

    def failed(self, error: KafkaError) -> None:
        """Membership failed for good: poll should raise ``error``."""
        ...


class _StartOver(Exception):
    """The rebalance must start again from the prepare step."""


def _grouped(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        grouped.setdefault(topic, []).append(partition)
    return grouped


class GroupMember:
    """This consumer's membership of its group (see the module docstring)."""

    def __init__(self, cluster: Cluster, group_id: str, config: ConsumerConfig, side: ConsumerSide) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.config = config
        self.side = side
        self.instance_id = config.group_instance_id
        self.member_id = ""
        self.generation = Generation(-1, "", self.instance_id)
        self.state = MemberState.UNJOINED
        self.protocol: str | None = None
        self.leader_id = ""
        #: Rebalances this member completed.
        self.rebalances = 0
        #: When the coordinator last counted this member in (a completed SyncGroup or an
        #: accepted heartbeat), on trio's clock. Past the session timeout the group may have
        #: handed its partitions to someone else: work on them should pause (see wait_for_contact).
        self.last_contact = float("-inf")
        self._contact = trio.Event()
        self._state_changed = trio.Event()
        self._rejoin = trio.Event()
        self._rejoin_reason = "joining the group"
        self._rejoin.set()
        self._needs_prepare = True
        #: The owned partitions belong to a generation the group has left behind.
        self._lost = False
        self._poll_expired = False
        #: What the assignor's user data says we had (sticky) and since which generation.
        self._last_assignment: dict[str, list[int]] = {}
        self._last_generation = -1
        #: Leader only: every member's topics and their partition counts at assignment.
        self._group_topics: frozenset[str] = frozenset()
        self._assigned_counts: dict[str, int] = {}

    # --- state ---------------------------------------------------------------------------------

    @property
    def client_config(self) -> ClientConfig:
        return self.cluster.config

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    @property
    def cooperative(self) -> bool:
        return self.config.rebalance_protocol == "cooperative"

    def _set_state(self, state: MemberState) -> None:
        self.state = state
        self._state_changed.set()
        self._state_changed = trio.Event()

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin.is_set():
            log.info("group %s member %s: rejoining: %s", self.group_id, self.member_id or "(new)", reason)
            self._rejoin_reason = reason
        self._rejoin.set()

    @property
    def rejoin_wanted(self) -> bool:
        return self._rejoin.is_set()

    def commit_generation(self) -> Generation:
        """The generation commits are made in: the last one this member completed, until
        it is lost. During a rebalance that is the previous one, which the coordinator
        still accepts until the new generation is formed."""
        return self.generation

    def _touch(self, at: float | None = None) -> None:
        self.last_contact = trio.current_time() if at is None else at
        self._contact.set()
        self._contact = trio.Event()

    async def wait_for_contact(self) -> None:
        """Until the coordinator next counts this member in."""
        await self._contact.wait()

    def _lose_generation(self, reason: str, *, reset_member_id: bool) -> None:
        log.info("group %s member %s: %s", self.group_id, self.member_id, reason)
        self.generation = Generation(-1, "", self.instance_id)
        if reset_member_id:
            self.member_id = ""
        if self.side.owned():
            self._lost = True
        self._needs_prepare = True
        self._set_state(MemberState.UNJOINED)
        self.request_rejoin(reason)

    # --- the tasks -----------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeat_loop)
            nursery.start_soon(self._watch_metadata)
            await self._coordinate()
            nursery.cancel_scope.cancel()

    async def _coordinate(self) -> None:
        while True:
            await self._rejoin.wait()
            if self._poll_expired:
                await self.side.wait_for_poll()
                self._poll_expired = False
            try:
                await self._rebalance()
            except _StartOver:
                continue
            except GroupMembershipError as exc:
                log.error("group %s: %s", self.group_id, exc)  # noqa: TRY400 (the message says it all)
                self._set_state(MemberState.UNJOINED)
                self.side.failed(exc)
                return
            except KafkaError as exc:
                log.warning("group %s: rebalance failed, retrying: %s", self.group_id, exc)
                if self.state is MemberState.REBALANCING:
                    self._set_state(MemberState.UNJOINED)
                self._rejoin.set()
                await trio.sleep(self.client_config.retry_backoff)

    async def _rebalance(self) -> None:
        await self.cluster.coordinator_for(self.group_id)
        # Again if the generation was lost while preparing (the prepare step waits for
        # the application's poll, and heartbeats go on meanwhile).
        while self._needs_prepare:
            self._needs_prepare = False
            await self._prepare()
        # A rejoin asked for from here on needs another round.
        self._rejoin = trio.Event()
        self._set_state(MemberState.REBALANCING)
        joined = await self._join()
        assignments = await self._assign(joined) if joined.leader == joined.member_id else []
        assignment = await self._sync(joined, assignments)
        self.generation = Generation(joined.generation_id, joined.member_id, self.instance_id)
        self.protocol = joined.protocol_name
        self.leader_id = joined.leader
        self._set_state(MemberState.STABLE)
        await self._complete(joined.generation_id, assignment)
        self._needs_prepare = True
        self.rebalances += 1

    # --- the steps of a rebalance --------------------------------------------------------------

    async def _prepare(self) -> None:
        owned = self.side.owned()
        if self._lost:
            self._lost = False
            if owned:
                await self.side.revoke(owned, lost=True)
        elif not self.cooperative:
            if owned:
                await self.side.revoke(owned, lost=False)
        else:
            topics = self.side.subscription()
            gone = [tp for tp in owned if tp.topic not in topics]
            if gone:
                await self.side.revoke(gone, lost=False)

    def _protocols(self) -> list[JoinGroupRequest.JoinGroupRequestProtocol]:
        topics = self.side.subscription()
        owned = _grouped(self.side.owned())
        generation = self.generation.generation_id if owned else -1
        protocols = []
        for name in self.config.partition_assignment_strategy:
            assignor = ASSIGNORS[name]
            metadata = subscription_metadata(
                topics,
                user_data=assignor.subscription_user_data(self._last_assignment, self._last_generation),
                owned=owned,
                generation=generation,
                rack=self.config.client_rack,
            )
            protocols.append(JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata))
        return protocols

    def _join_timeout(self) -> float:
        # The coordinator holds a JoinGroup until every member rejoined, up to the
        # rebalance timeout; Kafka's client waits that long plus 5 s.
        return max(self.client_config.request_timeout, self.config.max_poll_interval_ms / 1000 + 5)

    async def _join(self) -> JoinGroupResponse:
        while True:
            request = JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.max_poll_interval_ms,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=self._protocols(),
            )
            response: JoinGroupResponse = await self.cluster.send_to_coordinator(
                self.group_id, request, timeout=self._join_timeout()
            )
            code = response.error_code
            if not code:
                self.member_id = response.member_id
                return response
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                # JoinGroup v4+: the coordinator names us, and we join again with that id.
                self.member_id = response.member_id
                continue
            self._membership_error(code, "JoinGroup")
            await trio.sleep(self.client_config.retry_backoff)

    def _membership_error(self, code: int, what: str) -> None:
        """Act on a JoinGroup or SyncGroup error that leaves the member able to try again
        (returning), or raise."""
        error = error_for(code, context=f"{what} of group {self.group_id!r} (member {self.member_id or '(new)'})")
        if code in _FATAL:
            raise GroupMembershipError(str(error), error_code=code)
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self._lose_generation(f"{what} answered {ErrorCode(code).name}",
                                  reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)  # fmt: skip
            raise _StartOver
        if code in _COORDINATOR_MOVED:
            self.cluster.forget_coordinator(self.group_id)
            raise error
        if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return
        raise error

    async def _assign(self, joined: JoinGroupResponse) -> list[SyncGroupRequest.SyncGroupRequestAssignment]:
        """The leader's part: run the chosen assignor over every member's subscription."""
        name = joined.protocol_name or ""
        assignor = ASSIGNORS.get(name)
        if assignor is None:
            raise GroupMembershipError(f"group {self.group_id!r} chose assignor {name!r}, which this client lacks")
        subscriptions: dict[str, MemberSubscription] = {}
        for member in joined.members:
            try:
                subscriptions[member.member_id] = member_subscription(member.metadata, member.group_instance_id)
            except ProtocolError as exc:
                raise KafkaError(f"member {member.member_id} of group {self.group_id!r} sent a bad subscription: "
                                 f"{exc}") from exc  # fmt: skip
        topics = frozenset(topic for sub in subscriptions.values() for topic in sub.topics)
        metadata = self.cluster.metadata
        if not topics <= metadata.topics.keys():
            metadata = await self.cluster.refresh_metadata()
        counts = {t: metadata.topics[t].partition_count for t in topics if t in metadata.topics}
        plan = assignor.assign(counts, subscriptions)
        self._group_topics, self._assigned_counts = topics, counts
        log.debug("group %s generation %d: leader assigned %s", self.group_id, joined.generation_id,
                  {m: a.partitions for m, a in plan.items()})  # fmt: skip
        return [
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=assignment_bytes(assignment))
            for member, assignment in plan.items()
        ]

    async def _sync(
        self, joined: JoinGroupResponse, assignments: Sequence[SyncGroupRequest.SyncGroupRequestAssignment]
    ) -> bytes:
        request = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=self.instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=joined.protocol_name,
            assignments=list(assignments),
        )
        response: SyncGroupResponse = await self.cluster.send_to_coordinator(
            self.group_id, request, timeout=self._join_timeout()
        )
        if response.error_code:
            self._membership_error(response.error_code, "SyncGroup")
            # REBALANCE_IN_PROGRESS: the generation is gone before it started; join again.
            self.request_rejoin("the group started another rebalance during SyncGroup")
            raise _StartOver
        return bytes(response.assignment)

    async def _complete(self, generation: int, data: bytes) -> None:
        try:
            assignment = member_assignment(data)
        except ProtocolError as exc:
            raise KafkaError(f"group {self.group_id!r} generation {generation}: bad assignment: {exc}") from exc
        self._last_assignment = {t: list(ps) for t, ps in assignment.partitions.items()}
        self._last_generation = generation
        self._touch()
        new = [TopicPartition(t, p) for t, ps in assignment.partitions.items() for p in ps]
        new_set = set(new)
        owned = self.side.owned()
        owned_set = set(owned)
        revoked = [tp for tp in owned if tp not in new_set]
        added = [tp for tp in new if tp not in owned_set]
        log.info("group %s generation %d: member %s%s assigned %s (revoked %s)", self.group_id, generation,
                 self.member_id, " (leader)" if self.is_leader else "", new, revoked)  # fmt: skip
        await self.side.rebalanced(revoked, added)
        if revoked and self.cooperative:
            self.request_rejoin("partitions were revoked: the follow-up rebalance hands them to their new owners")

    # --- heartbeats ----------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        max_away = self.config.max_poll_interval_ms / 1000
        while True:
            while self.state is not MemberState.STABLE:
                await self._state_changed.wait()
            with trio.move_on_after(interval):
                await self._state_changed.wait()
            if self.state is not MemberState.STABLE:
                continue
            away = self.side.away_for()
            if away > max_away:
                await self._poll_expired_leave(away)
                continue
            await self._heartbeat()

    async def _heartbeat(self) -> None:
        generation = self.generation
        request = HeartbeatRequest(
            group_id=self.group_id,
            generation_id=generation.generation_id,
            member_id=generation.member_id,
            group_instance_id=self.instance_id,
        )
        sent = trio.current_time()
        try:
            response: HeartbeatResponse = await self.cluster.send_to_coordinator(self.group_id, request)
        except KafkaError as exc:
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            return
        if self.generation is not generation or self.state is not MemberState.STABLE:
            return  # the member moved on meanwhile
        code = response.error_code
        if not code or code == ErrorCode.REBALANCE_IN_PROGRESS:
            self._touch(sent)  # (in a rebalance the member still holds its partitions until it rejoins)
        if not code or code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the coordinator announced a rebalance")
        elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            self._lose_generation(f"heartbeat answered {ErrorCode(code).name}: partitions lost",
                                  reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)  # fmt: skip
        elif code in _COORDINATOR_MOVED:
            self.cluster.forget_coordinator(self.group_id)
        elif code in _FATAL:
            error = error_for(code, context=f"heartbeat of group {self.group_id!r}")
            self._set_state(MemberState.UNJOINED)
            self.side.failed(GroupMembershipError(str(error), error_code=code))
        else:
            log.warning("group %s: heartbeat answered %s", self.group_id, ErrorCode(code).name)

    async def _poll_expired_leave(self, away: float) -> None:
        log.warning(
            "group %s member %s: the application has not polled for %.1f s (max_poll_interval_ms=%d): "
            "leaving the group; it rejoins at the next poll",
            self.group_id, self.member_id, away, self.config.max_poll_interval_ms,
        )  # fmt: skip
        await self._send_leave("consumer poll timeout has expired")
        self._lose_generation("poll timeout expired", reset_member_id=self.instance_id is None)
        self._poll_expired = True

    # --- metadata ------------------------------------------------------------------------------

    async def _watch_metadata(self) -> None:
        while True:
            metadata = await self.cluster.next_metadata()
            if self.side.match_pattern(metadata):
                self.request_rejoin("the subscription pattern matches other topics now")
            elif self.is_leader and self.state is MemberState.STABLE and self._counts_changed(metadata):
                self.request_rejoin("the partitions of the group's topics changed")

    def _counts_changed(self, metadata: ClusterMetadata) -> bool:
        counts = {t: metadata.topics[t].partition_count for t in self._group_topics if t in metadata.topics}
        return counts != self._assigned_counts

    # --- leaving -------------------------------------------------------------------------------

    async def _send_leave(self, reason: str) -> None:
        if self.instance_id is not None or not self.member_id:
            return
        request = LeaveGroupRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            members=[LeaveGroupRequest.MemberIdentity(member_id=self.member_id, reason=reason)],
        )
        try:
            coordinator = await self.cluster.coordinator_for(self.group_id)
            # Not on the coordinator connection: a JoinGroup abandoned there may still
            # be waiting for the rebalance, and LeaveGroup would queue behind it.
            response: LeaveGroupResponse = await self.cluster.send(coordinator, request)
        except KafkaError as exc:
            log.warning("group %s: LeaveGroup failed: %s", self.group_id, exc)
            return
        codes = [response.error_code, *(m.error_code for m in response.members)]
        code = next((c for c in codes if c), 0)
        if code:
            log.info("group %s: LeaveGroup answered %s", self.group_id, ErrorCode(code).name)

    async def leave(self, reason: str) -> None:
        """Leave the group (no LeaveGroup for a static member) and forget the membership."""
        await self._send_leave(reason)
        self.generation = Generation(-1, "", self.instance_id)
        self.member_id = ""
        self._set_state(MemberState.UNJOINED)


__all__ = ["PROTOCOL_TYPE", "ConsumerSide", "GroupMember", "MemberState"]
