"""Producing to the aggregate: one Produce request per leader for many partitions.

Each copier has at most one batch in flight (so its partition's batches are
appended in order); :class:`ProduceMux` gathers the batches that copiers hand
it into one request per aggregate leader, carrying one batch per partition as
Kafka requires, and keeps several such requests in flight on the leader's
connection. Request overhead (encoding, the broker's per-request work, the
answer) is then paid once per round of partitions rather than once per batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from tributary.client.errors import KafkaError
from tributary.client.raw.batches import ProduceResult
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.crc32c import BytesLike


@dataclass(eq=False)
class _Slot:
    payload: BytesLike
    done: trio.Event = field(default_factory=trio.Event)
    result: ProduceResult | KafkaError | None = None


@dataclass(eq=False)
class _Leader:
    pending: dict[TopicPartition, _Slot] = field(default_factory=dict)
    wanted: trio.Event = field(default_factory=trio.Event)


class ProduceMux:
    def __init__(self, cluster: Cluster, nursery: trio.Nursery, *, max_in_flight: int) -> None:
        self.cluster = cluster
        self.raw = RawClient(cluster)
        self._nursery = nursery
        self._leaders: dict[int, _Leader] = {}
        # A semaphore, not a CapacityLimiter: the send task releases what the loop acquired.
        self._in_flight = trio.Semaphore(max_in_flight)

    async def produce(self, tp: TopicPartition, payload: BytesLike) -> ProduceResult:
        """Append one batch to ``tp`` (acks=all); raises the partition's error."""
        leader_id = await self.cluster.leader_for(tp.topic, tp.partition)
        leader = self._leaders.get(leader_id)
        if leader is None:
            leader = self._leaders[leader_id] = _Leader()
            self._nursery.start_soon(self._send_loop, leader_id, leader)
        if tp in leader.pending:
            raise RuntimeError(f"a batch for {tp} is already waiting: one at a time per partition")
        slot = leader.pending[tp] = _Slot(payload)
        leader.wanted.set()
        await slot.done.wait()
        result = slot.result
        assert result is not None
        if isinstance(result, KafkaError):
            raise result
        return result

    async def _send_loop(self, leader_id: int, leader: _Leader) -> None:
        while True:
            await leader.wanted.wait()
            leader.wanted = trio.Event()
            await self._in_flight.acquire()
            batch, leader.pending = leader.pending, {}
            if not batch:
                self._in_flight.release()
                continue
            self._nursery.start_soon(self._send, leader_id, batch)

    async def _send(self, leader_id: int, batch: dict[TopicPartition, _Slot]) -> None:
        try:
            results = await self.raw.produce(leader_id, {tp: slot.payload for tp, slot in batch.items()})
        finally:
            self._in_flight.release()
        for tp, slot in batch.items():
            slot.result = results[tp]
            slot.done.set()


__all__ = ["ProduceMux"]
