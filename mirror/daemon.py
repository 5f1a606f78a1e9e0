"""The mirror daemon: group membership, one copier per owned partition, checkpoints.

Theory of operation
-------------------
Instances of one mirror share the source's partitions through a consumer
group on the source cluster (:class:`MirrorSide` is the consumer side of
:class:`client.group.GroupMember`; it never polls records, it copies them).
For each partition it owns, a :class:`~mirror.partition.PartitionCopier`
recovers the exact position and copies batches; one
:class:`~mirror.fetcher.SourceFetcher` reads ahead for all of them.

Progress is recorded every ``commit_interval_ms``: first every translation
entry written so far is flushed (acks=all), then each partition's last
acknowledged positions are committed as its checkpoint in the aggregate
(:mod:`mirror.checkpoint`). A partition given up in a rebalance finishes the
batch in flight and is checkpointed before the group moves it; SIGTERM does
the same for all of them, then leaves the group and returns.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import trio
from prometheus_client import CollectorRegistry

from tributary.client.config import ClientConfig
from tributary.client.consumer.config import ConsumerConfig
from tributary.client.errors import KafkaError
from tributary.client.group.consumer_protocol import ConsumerProtocolMember
from tributary.client.group.membership import GroupMember, MemberState
from tributary.client.group.offsets import GroupOffsets, OffsetAndMetadata
from tributary.client.producer.producer import Producer
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import ClusterMetadata, TopicPartition
from tributary.mirror.checkpoint import CheckpointStore
from tributary.mirror.config import MirrorConfig
from tributary.mirror.context import MirrorContext
from tributary.mirror.fetcher import SourceFetcher
from tributary.mirror.flow import ByteBudget, Throttle
from tributary.mirror.links import Link
from tributary.mirror.metrics import MirrorMetrics
from tributary.mirror.naming import TopicFilter, aggregate_topic
from tributary.mirror.offset_map_writer import MappingWriter
from tributary.mirror.partition import PartitionCopier, PartitionState
from tributary.mirror.produce import ProduceMux
from tributary.mirror.topics import AggregateTopics

log = logging.getLogger("tributary.mirror")

#: How often lag gauges are refreshed.
METRICS_INTERVAL = 1.0


class MirrorStartError(Exception):
    """The mirror cannot start (a cluster does not answer); the message says which."""


def client_config(config: MirrorConfig, role: str) -> ClientConfig:
    return ClientConfig(
        security=config.source_security if role == "source" else config.target_security,
        client_id=f"tributary-mirror-{config.source_alias}-{role}",
        request_timeout=config.request_timeout_ms / 1000,
        max_in_flight=config.max_inflight_requests,
        send_buffer_bytes=config.socket_send_buffer_bytes,
        receive_buffer_bytes=config.socket_receive_buffer_bytes,
        reconnect_backoff_max=config.reconnect_backoff_max_ms / 1000,
        # New topics and partitions are found by the metadata refresh.
        metadata_max_age=config.discovery_interval_ms / 1000,
        # Everything fetched and not yet copied may be held at once, and a response stays whole
        # until each of its partitions' shares is copied: all of it pooled, so that a fetch is
        # received into a buffer used before, not fresh memory.
        response_buffer_pool_bytes=config.max_inflight_bytes + 2 * config.fetch_max_bytes,
    )


@dataclass(eq=False)
class _Running:
    copier: PartitionCopier
    scope: trio.CancelScope


class MirrorSide:
    """What group membership needs from the mirror (client.group.ConsumerSide)."""

    def __init__(self, mirror: Mirror, nursery: trio.Nursery) -> None:
        self.mirror = mirror
        self.nursery = nursery
        self.topics: frozenset[str] = frozenset()
        self.running: dict[TopicPartition, _Running] = {}
        self.error: KafkaError | None = None

    def subscription(self) -> frozenset[str]:
        return self.topics

    def owned(self) -> list[TopicPartition]:
        return sorted(self.running)

    def away_for(self) -> float:
        return 0.0  # the mirror is always "polling"

    async def wait_for_poll(self) -> None:
        await trio.lowlevel.checkpoint()

    def match_pattern(self, metadata: ClusterMetadata) -> bool:
        matched = self.mirror.filter.select(metadata.topics)
        if matched == self.topics:
            return False
        log.info("event=topics_matched added=%s removed=%s",
                 sorted(matched - self.topics), sorted(self.topics - matched))  # fmt: skip
        self.topics = matched
        return True

    def pattern(self) -> str | None:
        return None  # the mirror's filter (include, exclude, aliases) runs here: it sends topic names

    def failed(self, error: KafkaError) -> None:
        log.error("event=group_failed group=%s error=%r", self.mirror.config.group, str(error))
        self.error = error
        self.mirror.stop.set()

    async def revoke(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        await self.mirror.give_up(self, partitions, lost=lost)

    async def rebalanced(self, revoked: list[TopicPartition], added: list[TopicPartition]) -> None:
        if revoked:
            await self.mirror.give_up(self, revoked, lost=False)
        if added:
            log.info("event=assignment_added partitions=%s", [str(tp) for tp in added])
        for tp in added:
            self.mirror.take(self, tp)
        self.mirror.ctx.metrics.assigned.labels(self.mirror.config.source_alias).set(len(self.running))


class Mirror:
    def __init__(self, config: MirrorConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = MirrorMetrics(self.registry, source=config.source_alias)
        self.filter = TopicFilter(
            config.source_alias, config.include_pattern, config.exclude_pattern, frozenset(config.known_aliases)
        )
        self.stop = trio.Event()
        self._checkpoint_lock = trio.Lock()
        self._ctx: MirrorContext | None = None
        self._side: MirrorSide | None = None
        self.member: GroupMember | ConsumerProtocolMember | None = None

    @property
    def ctx(self) -> MirrorContext:
        assert self._ctx is not None, "the mirror is not running"
        return self._ctx

    def states(self) -> list[PartitionState]:
        side = self._side
        return [r.copier.state for r in side.running.values()] if side is not None else []

    # --- start ----------------------------------------------------------------------------------

    @staticmethod
    async def _open(stack: contextlib.AsyncExitStack, cluster: Cluster, side: str) -> Cluster:
        """Connect (a first Metadata answer), or fail the start with one clear line."""
        bootstrap = ",".join(f"{host}:{port}" for host, port in cluster.bootstrap_servers)
        what = "source" if side == "source" else "target (aggregate)"
        # (No timeout scope around it: the cluster's nursery outlives this call. Each connection
        # attempt is bounded by connect_timeout, and a cluster with no answering broker fails.)
        try:
            return await stack.enter_async_context(cluster)
        except KafkaError as exc:
            raise MirrorStartError(f"cannot reach the {what} cluster at {bootstrap}: {exc}") from None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Mirror until :attr:`stop` is set, then drain and return. Raises MirrorStartError
        when a cluster does not answer at start, KafkaError when group membership fails for good."""
        config = self.config
        async with contextlib.AsyncExitStack() as stack:
            source = await self._open(stack, Cluster(config.source, client_config(config, "source")), "source")
            target = await self._open(stack, Cluster(config.target, client_config(config, "target")), "target")
            # Not idempotent: it shares the target connections, which allow more requests in flight
            # than idempotence does, and a duplicated entry is harmless (same key, same value).
            # Lingering as long as a checkpoint interval: an entry is needed only once a checkpoint
            # covers its batch, and the checkpoint's flush sends whatever lingers. A short linger
            # sent a request of a few entries every few milliseconds during a copy.
            async with (
                Producer(target, acks="all", linger_ms=config.commit_interval_ms, enable_idempotence=False) as producer,
                trio.open_nursery() as nursery,
            ):
                topics = AggregateTopics(config, source, target)
                await topics.ensure_offsets_topic()
                self._ctx = ctx = MirrorContext(
                    config=config, source=source, target=target,
                    mapping=MappingWriter(producer, config.offsets_topic), metrics=self.metrics,
                    source_link=Link("source", config.source, self.metrics),
                    target_link=Link("target", config.target, self.metrics),
                    budget=ByteBudget(config.max_inflight_bytes), throttle=Throttle(config.bandwidth_bytes_per_second),
                    topics=topics, checkpoints=CheckpointStore(target, config.group),
                    producer=ProduceMux(
                        target, nursery, max_in_flight=config.max_inflight_requests,
                        depth=config.max_inflight_batches_per_partition,
                    ),
                )  # fmt: skip
                ctx.source_link.up()
                ctx.target_link.up()
                await self._serve(source, task_status)
                nursery.cancel_scope.cancel()

    async def _serve(self, source: Cluster, task_status: trio.TaskStatus[None]) -> None:
        config = self.config
        consumer_config = ConsumerConfig(
            partition_assignment_strategy=(config.assignor,),
            group_protocol="consumer" if config.group_protocol == "consumer" else "classic",
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            enable_auto_commit=False,
        )
        async with trio.open_nursery() as nursery:
            side = self._side = MirrorSide(self, nursery)
            side.match_pattern(source.metadata)
            kind = ConsumerProtocolMember if config.group_protocol == "consumer" else GroupMember
            member = self.member = self.ctx.member = kind(source, config.group, consumer_config, side)
            member_scope = trio.CancelScope()

            async def run_member() -> None:
                with member_scope:
                    await member.run()

            nursery.start_soon(SourceFetcher(self.ctx, self.states).run)
            nursery.start_soon(run_member)
            nursery.start_soon(self._checkpoint_loop)
            nursery.start_soon(self._source_commit_loop)
            nursery.start_soon(self._metrics_loop)
            log.info("event=started source=%s alias=%s target=%s group=%s",
                     config.source, config.source_alias, config.target, config.group)  # fmt: skip
            task_status.started()
            await self.stop.wait()
            log.info("event=stopping partitions=%d", len(side.running))
            member_scope.cancel()
            await self.give_up(side, list(side.running), lost=False)
            with trio.move_on_after(5):
                await member.leave("the mirror is shutting down")
            nursery.cancel_scope.cancel()
        if side.error is not None:
            raise side.error
        log.info("event=stopped")

    # --- partitions -----------------------------------------------------------------------------

    def take(self, side: MirrorSide, tp: TopicPartition) -> None:
        target = TopicPartition(aggregate_topic(self.config.source_alias, tp.topic), tp.partition)
        copier = PartitionCopier(self.ctx, PartitionState.create(tp, target))
        running = _Running(copier, trio.CancelScope())

        async def run() -> None:
            with running.scope:
                await copier.run()

        side.running[tp] = running
        side.nursery.start_soon(run)

    async def give_up(self, side: MirrorSide, partitions: Sequence[TopicPartition], *, lost: bool) -> None:
        """Stop copying ``partitions``: the batch in flight finishes, then (unless the
        partitions were lost to another member already) their progress is checkpointed."""
        stopping = [side.running[tp] for tp in partitions if tp in side.running]
        if not stopping:
            return
        log.info("event=assignment_revoked partitions=%s lost=%s", [str(tp) for tp in partitions], lost)
        for running in stopping:
            running.copier.state.stop()
        with trio.move_on_after(self.config.shutdown_timeout_ms / 1000) as waited:
            for running in stopping:
                await running.copier.state.done.wait()
        if waited.cancelled_caught:
            log.warning("event=stop_timeout partitions=%s: giving up on their batches in flight",
                        [str(r.copier.state.source) for r in stopping])  # fmt: skip
        for running in stopping:
            running.scope.cancel()
        if not lost:
            await self._checkpoint([r.copier.state for r in stopping])
        for running in stopping:
            state = running.copier.state
            del side.running[state.source]
            self.metrics.forget_partition(state.source.topic, state.source.partition)
        self.metrics.assigned.labels(self.config.source_alias).set(len(side.running))

    # --- progress -------------------------------------------------------------------------------

    async def _checkpoint(self, states: Sequence[PartitionState]) -> bool:
        # One at a time: the periodic checkpoint and a revocation's must not interleave, or an
        # older snapshot could be committed after a newer one.
        async with self._checkpoint_lock:
            snapshot = {s.target: s.recorded for s in states if s.recorded is not None and s.recorded != s.committed}
            if not snapshot:
                return True
            try:
                await self.ctx.mapping.flush()
                await self.ctx.checkpoints.save(snapshot)
            except KafkaError as exc:
                self.metrics.error("checkpoint")
                log.warning("event=checkpoint_failed partitions=%d error=%r", len(snapshot), str(exc))
                return False
            for state in states:
                if state.target in snapshot:
                    state.committed = snapshot[state.target]
            return True

    async def _checkpoint_loop(self) -> None:
        while True:
            await trio.sleep(self.config.commit_interval_ms / 1000)
            await self._checkpoint(self.states())

    async def _source_commit_loop(self) -> None:
        """Best effort: the source positions committed to the mirror's group on the source too,
        so the source's own tools show how far behind the mirror is. Recovery never reads them."""
        assert self.member is not None
        offsets = GroupOffsets(self.ctx.source, self.config.group)
        member = self.member
        last: dict[TopicPartition, int] = {}
        while True:
            await trio.sleep(self.config.commit_interval_ms / 1000)
            if member.state is not MemberState.STABLE:
                continue
            pending = {
                s.source: OffsetAndMetadata(s.committed.source)
                for s in self.states()
                if s.committed is not None and last.get(s.source) != s.committed.source
            }
            if not pending:
                continue
            try:
                with trio.fail_after(self.config.request_timeout_ms / 1000):
                    await offsets.commit(pending, member.commit_generation)
            except (KafkaError, trio.TooSlowError) as exc:
                log.debug("committing source positions failed: %s", exc)
                continue
            last.update({tp: o.offset for tp, o in pending.items()})

    async def _metrics_loop(self) -> None:
        while True:
            side = self._side
            if side is not None:
                for running in list(side.running.values()):
                    running.copier.update_lag()
            await trio.sleep(METRICS_INTERVAL)


__all__ = ["Mirror", "MirrorSide", "MirrorStartError", "client_config"]
