"""Consumer group membership with the consumer group protocol (KIP-848):
``group_protocol="consumer"``.

Theory of operation
-------------------
The coordinator, not a member, assigns the partitions, and it changes a member's
assignment one step at a time; there is no JoinGroup, SyncGroup or leader, and no member
stops consuming what it keeps while the group changes. :meth:`ConsumerProtocolMember.run`
runs three tasks while the consumer is subscribed:

- the *heartbeat* loop sends ConsumerGroupHeartbeat every interval the coordinator names
  (``group.consumer.heartbeat.interval.ms`` on the broker), and at once when something is
  to be said: the first join (epoch 0, with the subscription, the rebalance timeout and an
  empty owned list), a changed subscription, or an acknowledgement. Every heartbeat
  carries the partitions the consumer owns at that moment: that list is how a member tells
  the coordinator it has revoked what it was asked to give up. Answers carry the member's
  epoch and, when it changed, its assignment (by topic id).
- the *reconciler* applies each new assignment, as Kafka's consumer does: it first gives up
  the partitions the assignment no longer has (committing them when auto-commit is on, then
  ``on_revoke``), then takes the new ones (``on_assign``), each inside the application's
  poll; then it wakes the heartbeat loop, whose next heartbeat acknowledges the change.
  The coordinator hands a partition to its next owner only after that acknowledgement.
  Topic ids are resolved through the metadata (Metadata v10+); partitions of ids not known
  yet wait for the next refresh.
- the *metadata* watcher re-matches a pattern subscription that is evaluated here (the
  mirror's topic filter) and sends the new topic list when it changed. A ``re.Pattern``
  subscription of the Consumer goes to the coordinator as a regex instead
  (SubscribedTopicRegex), which it matches against the cluster's topics itself.

FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID mean the group moved on without this member: its
partitions are *lost* (``on_lost``, nothing committed) and it joins again with epoch 0 and
the same member id. An application that stops polling for ``max_poll_interval_ms`` leaves
the group (epoch -1) the same way, and rejoins at its next poll. A static member
(``group_instance_id``) leaves with epoch -2: the coordinator keeps its partitions for it
until its session expires.

The member id is chosen here, a random UUID in Kafka's text form, as the protocol wants
from ConsumerGroupHeartbeat v1 on (KIP-1082). ``session_timeout_ms`` and
``heartbeat_interval_ms`` are the broker's business with this protocol and are not sent.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterable

import trio

from tributary.client.config import ClientConfig
from tributary.client.consumer.config import ConsumerConfig
from tributary.client.consumer.errors import GroupMembershipError
from tributary.client.errors import KafkaError, error_for
from tributary.client.group.membership import ConsumerSide, MemberState
from tributary.client.group.offsets import Generation
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

log = logging.getLogger(__name__)

#: The epochs of leaving: for good, and (a static member) for now.
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT})
_LOST = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})


def new_member_id() -> str:
    """Kafka's Uuid.toString: base64url of 16 random bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerProtocolMember:
    """This consumer's membership with the consumer group protocol (see the module docstring)."""

    def __init__(self, cluster: Cluster, group_id: str, config: ConsumerConfig, side: ConsumerSide) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.config = config
        self.side = side
        self.instance_id = config.group_instance_id
        self.member_id = new_member_id()
        self.epoch = 0
        self.generation = Generation(-1, self.member_id, self.instance_id)
        self.state = MemberState.UNJOINED
        #: The server assignor asked for (None: the broker's default).
        self.protocol = config.group_remote_assignor
        self.leader_id = ""
        #: Assignment changes this member applied.
        self.rebalances = 0
        #: When the coordinator last answered a heartbeat, on trio's clock.
        self.last_contact = float("-inf")
        self._contact = trio.Event()
        self._interval = config.heartbeat_interval_ms / 1000
        #: The last assignment the coordinator gave, by topic id.
        self._assignment: dict[uuid.UUID, frozenset[int]] | None = None
        self._assignment_changed = trio.Event()
        self._wake = trio.Event()
        self._settled = trio.Event()
        self._settled.set()
        #: Send the subscription and the rebalance timeout with the next heartbeat.
        self._full = True
        self._lost = False
        self._poll_expired = False
        self._stopped = False

    # --- what the consumer reads -----------------------------------------------------------------

    @property
    def client_config(self) -> ClientConfig:
        return self.cluster.config

    @property
    def is_leader(self) -> bool:
        return False  # nobody leads: the coordinator assigns

    @property
    def rejoin_wanted(self) -> bool:
        return self._full

    def commit_generation(self) -> Generation:
        """Commits carry the member epoch, which the coordinator checks (STALE_MEMBER_EPOCH)."""
        return self.generation

    def request_rejoin(self, reason: str) -> None:
        """The subscription changed: tell the coordinator at once."""
        log.info("group %s member %s: %s", self.group_id, self.member_id, reason)
        self._full = True
        self._wake.set()

    async def wait_for_contact(self) -> None:
        await self._contact.wait()

    def _touch(self, at: float) -> None:
        self.last_contact = at
        self._contact.set()
        self._contact = trio.Event()

    # --- the tasks -------------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._reconcile_loop)
            nursery.start_soon(self._watch_metadata)
            await self._heartbeat_loop()
            nursery.cancel_scope.cancel()

    async def _heartbeat_loop(self) -> None:
        max_away = self.config.max_poll_interval_ms / 1000
        while True:
            if self._poll_expired:
                await self.side.wait_for_poll()
                self._poll_expired = False
            # A member that lost its partitions gives them up before it joins again (a join
            # must own nothing).
            await self._settled.wait()
            if self.epoch > 0 and self.side.away_for() > max_away:
                await self._poll_expired_leave()
                continue
            wait = self._interval
            try:
                failed = await self._heartbeat()
            except GroupMembershipError as exc:
                log.error("group %s: %s", self.group_id, exc)  # noqa: TRY400 (the message says it all)
                self.state = MemberState.UNJOINED
                self.side.failed(exc)
                return
            if failed:
                wait = max(self.client_config.retry_backoff, 0.0)
            with trio.move_on_after(wait):
                await self._wake.wait()
            self._wake = trio.Event()

    def _request(self) -> ConsumerGroupHeartbeatRequest:
        full = self._full or self.epoch == 0
        pattern = self.side.pattern()
        owned = self._owned_ids(self.side.owned())
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            rack_id=self.config.client_rack if full else None,
            rebalance_timeout_ms=self.config.max_poll_interval_ms if full else -1,
            subscribed_topic_names=(sorted(self.side.subscription()) if pattern is None else []) if full else None,
            subscribed_topic_regex=(pattern or "") if full else None,
            server_assignor=self.config.group_remote_assignor if full else None,
            topic_partitions=[
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(owned.items(), key=lambda item: item[0].bytes)
            ],
        )

    def _owned_ids(self, owned: Iterable[TopicPartition]) -> dict[uuid.UUID, set[int]]:
        metadata = self.cluster.metadata
        result: dict[uuid.UUID, set[int]] = {}
        for tp in owned:
            info = metadata.topics.get(tp.topic)
            if info is not None and info.topic_id is not None:
                result.setdefault(info.topic_id, set()).add(tp.partition)
        return result

    async def _heartbeat(self) -> bool:
        """One heartbeat; True if it failed in a way worth a quick retry."""
        request = self._request()
        sent = trio.current_time()
        try:
            response: ConsumerGroupHeartbeatResponse = await self.cluster.send_to_coordinator(self.group_id, request)
        except KafkaError as exc:
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            return True
        code = response.error_code
        if code == ErrorCode.NONE:
            self._accept(response, sent, full=request.rebalance_timeout_ms != -1)
            return False
        context = f"ConsumerGroupHeartbeat of group {self.group_id!r} (member {self.member_id})"
        if code in _LOST:
            self._lose(f"heartbeat answered {ErrorCode.of(code).name}: partitions lost")
            return True
        if code in _COORDINATOR_MOVED:
            self.cluster.forget_coordinator(self.group_id)
            return True
        if code in _RETRY:
            return True
        error = error_for(code, detail=response.error_message, context=context)
        raise GroupMembershipError(str(error), error_code=code)

    def _accept(self, response: ConsumerGroupHeartbeatResponse, sent: float, *, full: bool) -> None:
        if full:
            self._full = False
        if response.member_id:
            self.member_id = response.member_id
        if response.heartbeat_interval_ms > 0:
            self._interval = response.heartbeat_interval_ms / 1000
        if response.member_epoch != self.epoch:
            log.debug("group %s member %s: epoch %d", self.group_id, self.member_id, response.member_epoch)
        self.epoch = response.member_epoch
        self.generation = Generation(self.epoch, self.member_id, self.instance_id)
        self.state = MemberState.STABLE
        self._touch(sent)
        if response.assignment is not None:
            assignment = {
                tp.topic_id: frozenset(tp.partitions) for tp in response.assignment.topic_partitions if tp.partitions
            }
            if assignment != self._assignment:
                self._assignment = assignment
                self._assignment_changed.set()

    def _lose(self, reason: str) -> None:
        log.info("group %s member %s: %s", self.group_id, self.member_id, reason)
        self.epoch = 0
        self.generation = Generation(-1, self.member_id, self.instance_id)
        self.state = MemberState.UNJOINED
        self._assignment = None
        self._full = True
        if self.side.owned():
            self._lost = True
            self._settled = trio.Event()
            self._assignment_changed.set()

    async def _poll_expired_leave(self) -> None:
        log.warning(
            "group %s member %s: the application has not polled for %.1f s (max_poll_interval_ms=%d): "
            "leaving the group; it rejoins at the next poll",
            self.group_id, self.member_id, self.side.away_for(), self.config.max_poll_interval_ms,
        )  # fmt: skip
        await self._send_leave()
        self._lose("poll timeout expired")
        self._poll_expired = True

    # --- reconciliation --------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            await self._assignment_changed.wait()
            self._assignment_changed = trio.Event()
            if self._lost:
                owned = self.side.owned()
                if owned:
                    await self.side.revoke(owned, lost=True)
                self._lost = False
                self._settled.set()
                self._wake.set()
                continue
            await self._reconcile()

    async def _reconcile(self) -> None:
        assignment = self._assignment
        if assignment is None:
            return
        names = self.cluster.metadata.topic_names()
        if not set(assignment) <= names.keys():
            names = (await self.cluster.refresh_metadata()).topic_names()
        target = {TopicPartition(names[t], p) for t, ps in assignment.items() if t in names for p in ps}
        if not set(assignment) <= names.keys():
            log.info("group %s: topic ids %s not in the metadata yet", self.group_id,
                     sorted(str(t) for t in set(assignment) - names.keys()))  # fmt: skip
        owned = self.side.owned()
        revoked = [tp for tp in owned if tp not in target]
        added = sorted(target - set(owned))
        if not revoked and not added:
            return
        log.info("group %s epoch %d: member %s assigned %s (revoked %s)", self.group_id, self.epoch, self.member_id,
                 sorted(target), revoked)  # fmt: skip
        await self.side.rebalanced(revoked, added)
        self.rebalances += 1
        self._wake.set()  # acknowledge: the next heartbeat reports what is owned now

    async def _watch_metadata(self) -> None:
        while True:
            metadata = await self.cluster.next_metadata()
            if self.side.pattern() is None and self.side.match_pattern(metadata):
                self.request_rejoin("the subscription pattern matches other topics now")
            if self._assignment is not None and not set(self._assignment) <= metadata.topic_names().keys():
                self._assignment_changed.set()  # maybe the ids it waited for are known now

    # --- leaving -------------------------------------------------------------------------------

    async def _send_leave(self) -> None:
        if self.epoch <= 0:
            return
        epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id
        )
        try:
            coordinator = await self.cluster.coordinator_for(self.group_id)
            response: ConsumerGroupHeartbeatResponse = await self.cluster.send(coordinator, request)
        except KafkaError as exc:
            log.warning("group %s: leaving failed: %s", self.group_id, exc)
            return
        if response.error_code:
            log.info("group %s: leaving answered %s", self.group_id, ErrorCode.of(response.error_code).name)

    async def leave(self, reason: str) -> None:
        """Leave the group (epoch -1; a static member -2) and forget the membership."""
        log.info("group %s member %s: leaving: %s", self.group_id, self.member_id, reason)
        await self._send_leave()
        self.epoch = 0
        self.generation = Generation(-1, self.member_id, self.instance_id)
        self.state = MemberState.UNJOINED


__all__ = ["ConsumerProtocolMember", "new_member_id"]
