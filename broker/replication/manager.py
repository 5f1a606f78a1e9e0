"""The replica manager: roles, fetchers and ISR upkeep for every replica this broker holds.

It follows the registry's snapshots: each one brings every local replica into the role the
partition state gives it (PartitionManager.sync), and starts or stops the replica fetchers so
that there is exactly one per leader this broker follows. As a leader it keeps each partition's
ISR current: followers that fell behind (or whose broker left the cluster) are removed, followers
that caught up are added, written to the partition state znode with a version check
(ClusterRegistry.update_isr). The rules themselves are in leader_state.py, free of I/O.

Timing: ISR changes are looked for every ``replica.lag.time.max.ms / 2`` (as Kafka's
isr-expiration task), at once after a follower's fetch that may let it join, and on every new
snapshot (a broker that left is dropped without waiting for the lag time).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio

from tributary.broker.cluster.errors import ClusterError
from tributary.broker.cluster.model import NO_LEADER
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.log.errors import StorageError
from tributary.broker.partitions import Partition, PartitionManager
from tributary.broker.replication.config import ReplicationConfig
from tributary.broker.replication.fetcher import Fetcher
from tributary.broker.security.config import InterBrokerClient

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        partitions: PartitionManager,
        registry: ClusterRegistry,
        config: ReplicationConfig,
        on_isr_change: Callable[[str, int, bool], None] | None = None,
        *,
        inter_broker: InterBrokerClient | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._inter_broker = inter_broker
        self._partitions = partitions
        self._registry = registry
        self._config = config
        self._on_isr_change = on_isr_change
        self._fetchers: dict[int, trio.CancelScope] = {}
        self._poked = trio.Event()
        # high.watermark.fsync: leaders waiting for an fsync of their appends (group commit).
        self._to_flush: set[Partition] = set()
        self._flush_wanted = trio.Event()

    # --- running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._isr_upkeep)
            if self._config.high_watermark_fsync:
                nursery.start_soon(self._group_commit)
            task_status.started()
            async for snapshot in self._registry.snapshots():
                self._partitions.sync(snapshot)
                self._update_fetchers(nursery)
                self.poke()
            nursery.cancel_scope.cancel()

    def poke(self) -> None:
        """Look for ISR changes now."""
        self._poked.set()

    # --- followers

    def followed(self, leader_id: int) -> list[Partition]:
        """The partitions this broker follows from `leader_id`, their logs open (a log the
        open-log limit closed is opened again: a follower must keep copying)."""
        snapshot = self._registry.snapshot
        followed = []
        for known in self._partitions.local():
            if known.is_leader or known.leader != leader_id or self.broker_id not in known.replicas:
                continue
            p = self._partitions.replica(snapshot, known.topic, known.index) if known.log.closed else known
            if isinstance(p, Partition) and not p.is_leader and p.leader == leader_id:
                followed.append(p)
        return followed

    def _update_fetchers(self, nursery: trio.Nursery) -> None:
        wanted = {
            p.leader
            for p in self._partitions.local()
            if not p.is_leader and p.leader not in (NO_LEADER, self.broker_id) and self.broker_id in p.replicas
        }
        for leader in sorted(self._fetchers.keys() - wanted):
            self._fetchers.pop(leader).cancel()
        for leader in sorted(wanted - self._fetchers.keys()):
            scope = trio.CancelScope()
            self._fetchers[leader] = scope
            nursery.start_soon(self._run_fetcher, leader, scope)

    async def _run_fetcher(self, leader: int, scope: trio.CancelScope) -> None:
        fetcher = Fetcher(
            self.broker_id,
            leader,
            self._config,
            snapshot=lambda: self._registry.snapshot,
            followed=self.followed,
            security=self._inter_broker,
        )
        with scope:
            await fetcher.run()

    # --- leaders

    def request_flush(self, partition: Partition) -> None:
        """high.watermark.fsync: fsync this leader's appends soon; its high watermark follows."""
        self._to_flush.add(partition)
        self._flush_wanted.set()

    async def _group_commit(self) -> None:
        """One fsync per partition per round covers every append made while the round before
        was flushing: the cost of durable acknowledgements grows with rounds, not batches."""
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted = trio.Event()
            batch, self._to_flush = self._to_flush, set()
            for partition in batch:
                if partition.log.closed:
                    continue
                try:
                    await trio.to_thread.run_sync(partition.log.flush)
                except StorageError:
                    continue  # the log reports it; the high watermark waits for a flush that works
                partition.flushed()

    def follower_fetched(
        self, partition: Partition, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> None:
        """A follower's Fetch reached this leader: note its log end (it has everything below
        `fetch_offset`) and log start, advance the high watermark, and look at the ISR if it
        may join."""
        state = partition.leader_state
        if state is None:
            return
        durable = partition.durable_end if partition.durable is not None else None
        progress = state.followers.get(replica_id)
        start_before = None if progress is None else progress.log_start_offset
        leader_end = partition.log.log_end_offset
        if state.follower_fetched(
            replica_id, fetch_offset, leader_end, _now_ms(), durable, log_start_offset=log_start_offset
        ):
            partition.high_watermark_moved()
        elif progress is not None and progress.log_start_offset != start_before:
            partition.wake_replica_waiters()  # a DeleteRecords may be waiting for the low watermark
        if replica_id not in state.isr and state.pending_isr is None and fetch_offset >= state.high_watermark:
            self.poke()

    async def _isr_upkeep(self) -> None:
        interval = self._config.lag_time_max_ms / 2000
        while True:
            with trio.move_on_after(interval):
                await self._poked.wait()
            self._poked = trio.Event()
            for partition in self._partitions.local():
                if partition.is_leader and partition.replicated:
                    await self._maybe_change_isr(partition)

    async def _maybe_change_isr(self, partition: Partition) -> None:
        state = partition.leader_state
        if state is None:
            return
        snapshot = self._registry.snapshot
        epochs = {broker_id: info.epoch for broker_id, info in snapshot.brokers.items()}
        proposed = state.proposed_isr(
            partition.log.log_end_offset, _now_ms(), self._config.lag_time_max_ms, snapshot.live_broker_ids, epochs
        )
        if proposed is None:
            return
        before = state.isr
        state.pending_isr = proposed
        try:
            written = await self._registry.update_isr(partition.topic, partition.index, state.leader_epoch, proposed)
        except ClusterError as exc:
            log.info("%s-%d: cannot write ISR %s: %s", partition.topic, partition.index, list(proposed), exc)
            written = False
        if partition.leader_state is not state:
            return  # leadership moved while we wrote
        if not written:
            state.pending_isr = None
            return
        state.isr_written(proposed)
        shrunk = len(proposed) < len(before) or not set(before) <= set(proposed)
        log.info(
            "%s-%d: ISR %s -> %s (epoch %d, high watermark %d)",
            partition.topic, partition.index, list(before), list(proposed), state.leader_epoch, state.high_watermark,
        )  # fmt: skip
        if self._on_isr_change is not None:
            self._on_isr_change(partition.topic, partition.index, shrunk)
        if state.update_high_watermark(partition.log.log_end_offset):
            partition.high_watermark_moved()
