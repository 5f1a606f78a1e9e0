"""Transaction markers: a partition leader appending them (WriteTxnMarkers, API 27), and the
coordinator's side that has every partition of a decided transaction get one.

:func:`write_markers` is what a leader does with one marker of a WriteTxnMarkers request: append
the control batch (refused from an older producer epoch or coordinator epoch), wait until the
in-sync replicas have it (Kafka appends markers with acks=all), and for a ``__consumer_offsets``
partition let the group coordinator apply or drop the transaction's offsets. The handler of
WriteTxnMarkers calls it for markers from other brokers; :class:`MarkerSender` calls it directly
for partitions this broker leads (Kafka sends those over the network to itself; the outcome is
the same).

:class:`MarkerSender` delivers a :class:`~.messages.SendMarkers` effect: it groups the partitions
by leader, writes locally or sends WriteTxnMarkers to the leader (one connection per broker, one
request at a time), and retries what failed (a leader that moved, too few in-sync replicas, a
timeout) with the leaders of the newest snapshot, until every partition has its marker. It stops
when this broker no longer coordinates the transaction in the same coordinator epoch (the next
coordinator resends the markers from its log), or when a partition refuses the marker for good (a
newer epoch wrote there since). A partition whose topic was deleted needs no marker.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import trio

from tributary.broker.cluster.model import ClusterSnapshot
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.log.errors import LogError
from tributary.broker.partitions import Partition, PartitionManager
from tributary.broker.replication.channel import BrokerChannel, ChannelError
from tributary.broker.security.config import InterBrokerClient
from tributary.broker.txn.messages import SendMarkers, TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from tributary.protocol.records import ControlType

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 0
#: Errors after which the marker is tried again (the leader moved, or could not replicate it yet).
RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)
#: A newer producer epoch or coordinator wrote there: this coordinator's markers are stale.
STALE = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})

#: Told that the marker of a transaction is on a ``__consumer_offsets`` partition:
#: (partition, producer id, committed).
OffsetsMarkerHook = Callable[[int, int, bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Marker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _min_insync(snapshot: ClusterSnapshot, topic: str, default: int) -> int:
    info = snapshot.topics.get(topic)
    configured = None if info is None else info.config.get("min.insync.replicas")
    try:
        return int(configured) if configured is not None else default
    except ValueError:
        return default


async def write_markers(
    partitions: PartitionManager,
    snapshot: ClusterSnapshot,
    marker: Marker,
    targets: Iterable[TopicPartition],
    *,
    default_min_insync: int,
    timeout_s: float,
    on_offsets_marker: OffsetsMarkerHook | None,
) -> dict[TopicPartition, ErrorCode]:
    """Appends ``marker`` to each of ``targets`` this broker leads and waits for their in-sync
    replicas; the error code of each (NONE: the marker is committed there)."""
    results: dict[TopicPartition, ErrorCode] = {}
    waits: list[tuple[TopicPartition, Partition, int]] = []
    kind = ControlType.COMMIT if marker.commit else ControlType.ABORT
    for tp in targets:
        topic, index = tp
        target = partitions.lookup(snapshot, topic, index)
        if isinstance(target, ErrorCode):
            results[tp] = target
            continue
        state = target.leader_state
        if (
            target.replicated
            and state is not None
            and len(state.isr) < _min_insync(snapshot, topic, default_min_insync)
        ):
            results[tp] = ErrorCode.NOT_ENOUGH_REPLICAS
            continue
        now = _now_ms()
        try:
            appended = target.append_marker(
                kind, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, now
            )
            if target.log.needs_flush(now):
                await trio.to_thread.run_sync(target.log.flush)
        except LogError as exc:
            if exc.error_code not in STALE:
                log.info("%s-%d: marker for producer %d refused: %s", topic, index, marker.producer_id, exc)
            results[tp] = exc.error_code
            continue
        waits.append((tp, target, appended.last_offset + 1))
    deadline = trio.current_time() + timeout_s
    for tp, target, end in waits:
        if target.replicated and not await target.wait_for_high_watermark(end, deadline):
            results[tp] = ErrorCode.REQUEST_TIMED_OUT if target.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        results[tp] = ErrorCode.NONE
        if tp[0] == OFFSETS_TOPIC and on_offsets_marker is not None:
            await on_offsets_marker(tp[1], marker.producer_id, marker.commit)
    return results


def marker_request(marker: Marker, targets: Iterable[TopicPartition]) -> WriteTxnMarkersRequest:
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, index in sorted(targets):
        topics[topic].append(index)
    return WriteTxnMarkersRequest(
        markers=[
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.commit,
                topics=[
                    WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                    for name, indexes in topics.items()
                ],
                coordinator_epoch=marker.coordinator_epoch,
            )
        ]
    )


def marker_results(response: WriteTxnMarkersResponse) -> dict[TopicPartition, ErrorCode]:
    """Each partition's code; one this broker does not know counts as UNKNOWN_SERVER_ERROR (retried)."""
    known = ErrorCode._value2member_map_
    return {
        (topic.name, p.partition_index): ErrorCode(p.error_code) if p.error_code in known
        else ErrorCode.UNKNOWN_SERVER_ERROR
        for result in response.markers
        for topic in result.topics
        for p in topic.partitions
    }  # fmt: skip


class MarkerSender:
    """Delivers the markers of decided transactions; see the module docstring."""

    def __init__(
        self,
        registry: ClusterRegistry,
        partitions: PartitionManager,
        *,
        write_local: Callable[[Marker, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]],
        current: Callable[[str, int], bool],
        done: Callable[[str, int, TopicPartition], None],
        abandoned: Callable[[str, int], None],
        timeout_s: float,
        backoff_s: float,
        max_frame_size: int = 16 * 1024 * 1024,
        inter_broker: InterBrokerClient | None = None,
    ) -> None:
        self._registry = registry
        # Markers travel the inter-broker listener with its TLS and SASL login, as replication does.
        self._inter_broker = inter_broker
        self._partitions = partitions
        self._write_local = write_local
        self._current = current
        self._done = done
        self._abandoned = abandoned
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._max_frame_size = max_frame_size
        self._channels: dict[int, BrokerChannel] = {}
        self._locks: dict[int, trio.Lock] = defaultdict(trio.Lock)

    async def deliver(self, effect: SendMarkers) -> None:
        marker = Marker(effect.producer_id, effect.producer_epoch, effect.commit, effect.coordinator_epoch)
        remaining = set(effect.partitions)
        txn = effect.transactional_id
        while remaining and self._current(txn, effect.coordinator_epoch):
            snapshot = self._registry.snapshot
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(remaining):
                if tp[0] not in snapshot.topics:
                    # Deleted: nothing left to mark (as Kafka does for a topic gone from its metadata).
                    remaining.discard(tp)
                    self._done(txn, effect.coordinator_epoch, tp)
                    continue
                found = snapshot.leader_for(tp[0], tp[1])
                if found is not None:
                    by_leader[found.id].append(tp)
            results = await self._send_all(marker, by_leader)
            for tp, error in results.items():
                if error == ErrorCode.NONE:
                    remaining.discard(tp)
                    self._done(txn, effect.coordinator_epoch, tp)
                elif error in STALE:
                    self._abandoned(txn, effect.coordinator_epoch)
                    return
                elif error not in RETRIABLE:
                    log.warning("transactional id %s: marker for %s-%d failed with %s; retrying", txn, tp[0], tp[1],
                                error.name)  # fmt: skip
            if remaining:
                await trio.sleep(self._backoff_s)

    async def _send_all(
        self, marker: Marker, by_leader: dict[int, list[TopicPartition]]
    ) -> dict[TopicPartition, ErrorCode]:
        """One request per leader, all at once."""
        results: dict[TopicPartition, ErrorCode] = {}

        async def to_leader(leader: int, tps: list[TopicPartition]) -> None:
            results.update(await self._send(leader, marker, tps))

        async with trio.open_nursery() as nursery:
            for leader, tps in by_leader.items():
                nursery.start_soon(to_leader, leader, tps)
        return results

    async def _send(self, leader: int, marker: Marker, tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        if leader == self._registry.broker_id:
            return await self._write_local(marker, tps)
        broker = self._registry.snapshot.brokers.get(leader)
        if broker is None:
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        async with self._locks[leader]:
            try:
                channel = self._channels.get(leader)
                if channel is None:
                    channel = await BrokerChannel.connect(
                        broker,
                        f"tributary-txn-markers-{self._registry.broker_id}",
                        self._max_frame_size,
                        self._inter_broker,
                    )
                    self._channels[leader] = channel
                response = await channel.request(
                    marker_request(marker, tps), WRITE_TXN_MARKERS_VERSION, self._timeout_s + 5
                )
            except ChannelError as exc:
                log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
                stale = self._channels.pop(leader, None)
                if stale is not None:
                    await stale.aclose()
                return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        results = marker_results(response)
        return {tp: results.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in tps}

    async def aclose(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.aclose()
