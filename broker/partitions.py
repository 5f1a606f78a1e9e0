"""The partition replicas this broker holds: their logs, their role, and waiters.

The cluster registry says which broker leads which partition in which leader epoch; this module
turns that into local state. Every replica assigned here is a :class:`Partition` in one of two
roles, derived from the partition state and nothing else:

- **leader** (the state names this broker): it appends, serves clients and followers, and keeps a
  :class:`LeaderState` (ISR, high watermark) started when it took over in that epoch;
- **follower**: a replica fetcher copies the leader's batches into its log, after truncating it
  to where it agrees with the leader (``needs_truncation``).

A role change happens when the state's leader or epoch changes, whoever notices first: the replica
manager on every new snapshot, or a request that looks the partition up. A request resolves to a
leader :class:`Partition` or to the error code a client acts on (UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER). Logs are opened when first needed and dropped when their topic
disappears from the registry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import trio

from tributary.broker.cluster.model import NO_LEADER, AssignmentChange, ClusterSnapshot, PartitionState
from tributary.broker.log.errors import CorruptLogError, LogError
from tributary.broker.log.log import AppendResult, PartitionLog
from tributary.broker.log.manager import LogManager
from tributary.broker.replication.leader_state import LeaderState
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.records import ControlType

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


def leader_epoch_error(requested: int, current: int) -> ErrorCode | None:
    """Kafka's check of a request's current_leader_epoch against this leader's (KIP-320): an
    older one is FENCED_LEADER_EPOCH (the client missed a leader change), a newer one
    UNKNOWN_LEADER_EPOCH (this broker has not heard of it yet); -1 means not known, not checked."""
    if requested < 0 or requested == current:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


class Partition:
    """One replica held by this broker, leader or follower."""

    __slots__ = (
        "_hw_waiters",
        "_waiters",
        "durable",
        "index",
        "leader",
        "leader_epoch",
        "leader_state",
        "log",
        "needs_truncation",
        "replicas",
        "topic",
    )

    def __init__(self, topic: str, index: int, partition_log: PartitionLog, state: PartitionState) -> None:
        self.topic = topic
        self.index = index
        self.log = partition_log
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = state.replicas
        #: Set while this broker leads the partition.
        self.leader_state: LeaderState | None = None
        #: A follower must reconcile its log with the leader's (OffsetForLeaderEpoch) before fetching.
        self.needs_truncation = False
        #: high.watermark.fsync: the leader's appends count for the high watermark once fsynced;
        #: `durable(partition)` asks for that fsync (a group commit, see ReplicaManager).
        self.durable: Callable[[Partition], None] | None = None
        self._waiters: set[trio.Event] = set()
        self._hw_waiters: set[trio.Event] = set()

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    @property
    def replicated(self) -> bool:
        return len(self.replicas) > 1

    @property
    def durable_end(self) -> int:
        """How much of this leader's log counts for its high watermark: all of it, or under
        high.watermark.fsync only what is fsynced (the recovery point)."""
        return self.log.recovery_point if self.durable is not None else self.log.log_end_offset

    # --- the roles

    def become_leader(self, broker_id: int, state: PartitionState, now_ms: int) -> None:
        plog = self.log
        self.leader, self.leader_epoch, self.replicas = state.leader, state.leader_epoch, state.replicas
        self.needs_truncation = False
        # A single replica is its own ISR: its high watermark is its log end, as before replication.
        plog.hw_follows_log_end = not self.replicated
        plog.assign_leader_epoch(state.leader_epoch)
        self.leader_state = LeaderState(
            broker_id,
            state.replicas,
            state.isr or (broker_id,),
            state.leader_epoch,
            epoch_start_offset=plog.log_end_offset,
            high_watermark=plog.high_watermark,
            now_ms=now_ms,
        )
        if self.leader_state.update_high_watermark(self.durable_end):
            self.high_watermark_moved()
        if self.durable is not None and self.replicated and self.durable_end < plog.log_end_offset:
            # high.watermark.fsync after an unclean restart: the tail recovered past the last
            # checkpointed recovery point counts only once fsynced. Without this flush it waited
            # for the next produce, and until then the high watermark stayed below this epoch's
            # start offset: ListOffsets answered OFFSET_NOT_AVAILABLE and fetches saw nothing.
            self.durable(self)
        log.info(
            "%s-%d: leader in epoch %d (ISR %s, log end %d, high watermark %d)",
            self.topic, self.index, state.leader_epoch, list(state.isr), plog.log_end_offset, plog.high_watermark,
        )  # fmt: skip
        self.notify_appended()

    def become_follower(self, state: PartitionState) -> None:
        was_leader = self.leader_state is not None
        self.leader, self.leader_epoch, self.replicas = state.leader, state.leader_epoch, state.replicas
        self.leader_state = None
        self.log.hw_follows_log_end = False
        self.needs_truncation = state.leader != NO_LEADER
        if was_leader:
            log.info("%s-%d: follower of %d in epoch %d", self.topic, self.index, state.leader, state.leader_epoch)
        # Fetches and acks=all waiting on this replica as a leader must give up now.
        self.notify_appended()
        self._wake_hw_waiters()

    # --- appending as the leader

    def append(self, records: BytesLike, now_ms: int, *, coordinator: bool = False) -> AppendResult:
        """Append as the leader (offsets and this epoch stamped), then advance the high watermark.
        ``coordinator``: written by this broker's group coordinator (see PartitionLog.append)."""
        result = self.log.append(records, self.leader_epoch, now_ms, coordinator=coordinator)
        if not result.duplicate:
            self.notify_appended()
            self.leader_appended()
        return result

    def append_many(self, parts: list[BytesLike], now_ms: int) -> list[AppendResult | LogError | ProtocolError]:
        """:meth:`append` of each of ``parts`` in turn (see PartitionLog.append_many), each
        outcome apart; waiters are woken and the high watermark advanced once for them all."""
        results = self.log.append_many(parts, self.leader_epoch, now_ms)
        if any(isinstance(result, AppendResult) and not result.duplicate for result in results):
            self.notify_appended()
            self.leader_appended()
        return results

    def append_marker(
        self, marker: ControlType, producer_id: int, producer_epoch: int, coordinator_epoch: int, now_ms: int
    ) -> AppendResult:
        """Append a transaction marker as the leader (WriteTxnMarkers), then advance the high
        watermark; readers of committed data wake, as the last stable offset may move."""
        result = self.log.append_marker(
            marker,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            leader_epoch=self.leader_epoch,
            now_ms=now_ms,
        )
        self.notify_appended()
        self.leader_appended()
        return result

    def leader_appended(self) -> None:
        state = self.leader_state
        if state is None:
            return
        if self.durable is not None and self.replicated:
            self.durable(self)  # the high watermark moves once the flush is done
        elif state.update_high_watermark(self.log.log_end_offset):
            self.high_watermark_moved()

    def flushed(self) -> None:
        """The log was fsynced: under high.watermark.fsync that may move the high watermark."""
        state = self.leader_state
        if state is not None and state.update_high_watermark(self.durable_end):
            self.high_watermark_moved()

    def high_watermark_moved(self) -> None:
        state = self.leader_state
        if state is not None:
            self.log.high_watermark = state.high_watermark
        # Consumers read up to the high watermark: a move is new data for them.
        self.notify_appended()
        self._wake_hw_waiters()

    async def wait_for_high_watermark(self, offset: int, deadline: float) -> bool:
        """Wait until the high watermark reaches `offset` while this broker leads in the same
        epoch; False on timeout or when leadership moved."""
        epoch = self.leader_epoch
        while self.leader_state is not None and self.leader_epoch == epoch and not self.log.closed:
            if self.log.high_watermark >= offset:
                return True
            event = trio.Event()
            self._hw_waiters.add(event)
            try:
                with trio.move_on_at(deadline) as scope:
                    await event.wait()
                if scope.cancelled_caught:
                    return False
            finally:
                self._hw_waiters.discard(event)
        return False

    def low_watermark(self, live: frozenset[int]) -> int:
        """DeleteRecords' answer: the smallest log start offset among this leader and its live
        followers (this log's own on a partition without followers)."""
        state = self.leader_state
        start = self.log.log_start_offset
        return start if state is None else state.low_watermark(start, live)

    async def wait_for_low_watermark(self, offset: int, deadline: float, live: Callable[[], frozenset[int]]) -> bool:
        """Wait until every live replica's log starts at `offset` or later (followers learn the
        leader's log start from their next fetch) while this broker leads in the same epoch;
        False on timeout or when leadership moved."""
        epoch = self.leader_epoch
        while self.leader_state is not None and self.leader_epoch == epoch and not self.log.closed:
            if self.low_watermark(live()) >= offset:
                return True
            event = trio.Event()
            self._hw_waiters.add(event)
            try:
                with trio.move_on_at(deadline) as scope:
                    await event.wait()
                if scope.cancelled_caught:
                    return False
            finally:
                self._hw_waiters.discard(event)
        return False

    def wake_replica_waiters(self) -> None:
        """A follower's progress changed: whoever waits on the replicas looks again."""
        self._wake_hw_waiters()

    def _wake_hw_waiters(self) -> None:
        waiters, self._hw_waiters = self._hw_waiters, set()
        for event in waiters:
            event.set()

    # --- long polls

    def watch(self, event: trio.Event) -> None:
        """Have ``event`` set on the next append or high watermark move (long-polling fetches)."""
        self._waiters.add(event)

    def unwatch(self, event: trio.Event) -> None:
        self._waiters.discard(event)

    def notify_appended(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for event in waiters:
            event.set()


class PartitionManager:
    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        registration_epoch: Callable[[], int] = lambda: -1,
        durable: Callable[[Partition], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        #: high.watermark.fsync: how a leader asks for its appends to be fsynced.
        self.durable = durable
        #: This broker's epoch (the czxid of its registration), as the registry last saw it.
        self._registration_epoch = registration_epoch
        self._partitions: dict[tuple[str, int], Partition] = {}
        # Partitions whose log could not be opened, and why: logged once, not per request.
        self._open_failures: dict[tuple[str, int], str] = {}

    def _open_failed(self, topic: str, index: int, exc: OSError | CorruptLogError) -> None:
        reason = str(exc) if isinstance(exc, CorruptLogError) else exc.strerror or str(exc)
        if self._open_failures.get((topic, index)) != reason:
            log.warning("cannot open the log of %s-%d: %s (KAFKA_STORAGE_ERROR until it can)", topic, index, reason)
        self._open_failures[topic, index] = reason

    def replica(self, snapshot: ClusterSnapshot, topic: str, index: int) -> Partition | ErrorCode:
        """The local replica of a partition assigned here, in the role the snapshot gives it."""
        info = snapshot.topics.get(topic)
        state = info.partitions.get(index) if info is not None else None
        if info is None or state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self.broker_id not in state.replicas and state.leader != self.broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        partition = self._partitions.get((topic, index))
        previous = None
        if partition is not None and partition.log.closed:
            # Taken offline, deleted or closed by the open-log limit under us: ask the log manager again.
            del self._partitions[topic, index]
            partition.notify_appended()
            previous, partition = partition, None
        if partition is None:
            try:
                partition_log = self.logs.get_or_create(topic, index, info.config)
            except (OSError, CorruptLogError) as exc:
                # No space for its directory, or no file handle left: this partition fails
                # (the client retries), the broker and its other partitions go on.
                self._open_failed(topic, index, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            self._open_failures.pop((topic, index), None)
            partition = Partition(topic, index, partition_log, state)
            partition.durable = self.durable
            self._partitions[topic, index] = partition
            kept = None if previous is None or previous.leader_epoch != state.leader_epoch else previous.leader_state
            if kept is not None:
                # Only the file handles were recycled: the leader's knowledge of its followers stays.
                partition.leader_state = kept
                partition_log.hw_follows_log_end = not partition.replicated
                partition_log.high_watermark = kept.high_watermark
            self._sync_role(partition, state, fresh=previous is None or partition.leader_state is None)
        else:
            self._sync_role(partition, state, fresh=False)
        return partition

    def _sync_role(self, partition: Partition, state: PartitionState, *, fresh: bool) -> None:
        if state.leader == self.broker_id and self._stale(state):
            # Made leader before this broker last started: the controller elects again (a new
            # epoch, perhaps another leader); until then this replica neither leads nor follows.
            if partition.is_leader or fresh:
                partition.become_follower(PartitionState(NO_LEADER, state.leader_epoch, state.replicas, state.isr))
            return
        if state.leader == self.broker_id:
            # Within its epoch the leader is the only writer of the ISR, so it never adopts one
            # from a snapshot: a snapshot read before its own latest write would take it back.
            if fresh or partition.leader_state is None or partition.leader_epoch != state.leader_epoch:
                partition.become_leader(self.broker_id, state, _now_ms())
            elif partition.replicas != state.replicas:
                partition.replicas = state.replicas
                partition.leader_state.set_replicas(state.replicas)
                partition.log.hw_follows_log_end = not partition.replicated
        elif (
            fresh
            or partition.leader_state is not None
            or partition.leader_epoch != state.leader_epoch
            or (partition.leader != state.leader)
        ):
            partition.become_follower(state)
        else:
            partition.replicas = state.replicas

    def _stale(self, state: PartitionState) -> bool:
        """Made leader before this broker last started, with followers whose logs may now be
        ahead of ours: leading on in the same epoch would hide that from them. (A partition of
        one replica has no one to mislead: it leads at once, the controller's epoch bump follows.)"""
        return len(state.replicas) > 1 and self._registration_epoch() > state.zxid >= 0

    def lookup(self, snapshot: ClusterSnapshot, topic: str, index: int) -> Partition | ErrorCode:
        """The partition if this broker leads it: what client requests may act on."""
        partition = self.replica(snapshot, topic, index)
        if isinstance(partition, Partition) and not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition

    def get(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def local(self) -> Iterable[Partition]:
        return list(self._partitions.values())

    def sync(self, snapshot: ClusterSnapshot) -> None:
        """Bring every replica assigned here into the role the snapshot gives it.

        Only replicas whose leader or epoch changed are touched (opening their log if needed),
        and followers, whose fetcher needs them. A single-replica partition whose role did not
        change stays as it is, its log possibly closed by the open-log limit until a request
        needs it: reopening every log at every snapshot would thrash that limit."""
        for topic in snapshot.topics.values():
            for index, state in topic.partitions.items():
                if self.broker_id not in state.replicas:
                    continue
                known = self._partitions.get((topic.name, index))
                if known is None:
                    if state.leader == self.broker_id and len(state.replicas) == 1:
                        continue  # opened on first use, as before replication
                elif (
                    known.leader == state.leader
                    and known.leader_epoch == state.leader_epoch
                    and known.replicas == state.replicas
                ):
                    continue
                self.replica(snapshot, topic.name, index)

    def apply(self, change: AssignmentChange, first: bool) -> None:
        """Follow the registry's replica assignment: drop the logs of replicas this
        broker lost (a deleted topic, or the old incarnation of a re-created one),
        open those it gained. The first change lists everything assigned now, so
        local logs it does not name (topics deleted while this broker was down)
        are deleted too.

        A partition that merely lost its leader keeps its log: its broker may be back.
        Every change also hands the logs kept here their topic's current config, so an
        altered retention or segment size takes effect without waiting for traffic. (The log
        manager keeps only so many logs open: the others wait closed until a request needs them.)"""
        removed = {(r.topic, r.partition) for r in change.removed}
        if first:
            assigned = {(r.topic, r.partition) for r in change.added}
            removed |= {(tp.topic, tp.partition) for tp in self.logs.partitions()} - assigned
        for topic, index in sorted(removed):
            log.info("partition %s-%d is no longer assigned here: deleting its log", topic, index)
            partition = self._partitions.pop((topic, index), None)
            if partition is not None:
                partition.become_follower(PartitionState(NO_LEADER, -1, (), ()))
                partition.needs_truncation = False
            self.logs.delete_partition(topic, index)
        for replica in sorted(change.added):
            self.replica(change.snapshot, replica.topic, replica.partition)
        for tp in self.logs.partitions():
            info = change.snapshot.topics.get(tp.topic)
            if info is not None:
                self.logs.set_topic_overrides(tp.topic, info.config)
