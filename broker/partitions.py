"""The partitions this broker leads: their logs, and fetches waiting for appends.

The cluster registry says which broker leads which partition; this module
turns that into local state. A request for a partition resolves to a
:class:`Partition` or to the error code a client acts on
(UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER). Logs are opened when
first needed and dropped when their topic disappears from the registry.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import trio

from tributary.broker.cluster.model import AssignmentChange, ClusterSnapshot
from tributary.broker.log.errors import CorruptLogError
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.manager import LogManager
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)


class Partition:
    """A partition led by this broker."""

    __slots__ = ("_waiters", "index", "leader_epoch", "log", "topic")

    def __init__(self, topic: str, index: int, partition_log: PartitionLog, leader_epoch: int) -> None:
        self.topic = topic
        self.index = index
        self.log = partition_log
        self.leader_epoch = leader_epoch
        self._waiters: set[trio.Event] = set()

    def watch(self, event: trio.Event) -> None:
        """Have ``event`` set on the next append (long-polling fetches)."""
        self._waiters.add(event)

    def unwatch(self, event: trio.Event) -> None:
        self._waiters.discard(event)

    def notify_appended(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for event in waiters:
            event.set()


class PartitionManager:
    def __init__(self, broker_id: int, logs: LogManager) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self._partitions: dict[tuple[str, int], Partition] = {}
        # Partitions whose log could not be opened, and why: logged once, not per request.
        self._open_failures: dict[tuple[str, int], str] = {}

    def _open_failed(self, topic: str, index: int, exc: OSError | CorruptLogError) -> None:
        reason = str(exc) if isinstance(exc, CorruptLogError) else exc.strerror or str(exc)
        if self._open_failures.get((topic, index)) != reason:
            log.warning("cannot open the log of %s-%d: %s (KAFKA_STORAGE_ERROR until it can)", topic, index, reason)
        self._open_failures[topic, index] = reason

    def lookup(self, snapshot: ClusterSnapshot, topic: str, index: int) -> Partition | ErrorCode:
        info = snapshot.topics.get(topic)
        state = info.partitions.get(index) if info is not None else None
        if info is None or state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if state.leader != self.broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        partition = self._partitions.get((topic, index))
        if partition is not None and partition.log.closed:
            # Taken offline (or deleted) under us: ask the log manager again.
            del self._partitions[topic, index]
            partition.notify_appended()
            partition = None
        if partition is None:
            try:
                partition_log = self.logs.get_or_create(topic, index, info.config)
            except (OSError, CorruptLogError) as exc:
                # No space for its directory, or no file handle left: this partition fails
                # (the client retries), the broker and its other partitions go on.
                self._open_failed(topic, index, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            self._open_failures.pop((topic, index), None)
            partition = Partition(topic, index, partition_log, state.leader_epoch)
            self._partitions[topic, index] = partition
        partition.leader_epoch = state.leader_epoch
        return partition

    def local(self) -> Iterable[Partition]:
        return list(self._partitions.values())

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
                partition.notify_appended()  # wake fetches so they see the error
            self.logs.delete_partition(topic, index)
        for replica in sorted(change.added):
            self.lookup(change.snapshot, replica.topic, replica.partition)
        for tp in self.logs.partitions():
            info = change.snapshot.topics.get(tp.topic)
            if info is not None:
                self.logs.set_topic_overrides(tp.topic, info.config)
