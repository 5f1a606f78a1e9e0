"""Raw record batches for the mirror: fetch them as bytes, produce them unchanged.

Nothing on this path decompresses or re-encodes a batch. A fetch returns, per
partition, the bytes of the complete batches the broker sent and each
batch's header (:class:`~client.batches.RawBatches`); a produce sends a batch
byte for byte, so the target broker rewrites only baseOffset and
partitionLeaderEpoch, the two fields outside the CRC.

The per-broker calls (:meth:`RawClient.fetch`, :meth:`RawClient.produce`)
send one request and return a result or an error per partition without
raising, so a mirror can handle each partition on its own; they report
stale-metadata errors to the cluster. Calls are pipelined on the broker's
connection, so several fetches (to different partitions, or the next
offsets of the same one) can be in flight at once. The per-partition helpers
find the leader and raise instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import trio

from tributary.client.errors import KafkaError, KafkaProtocolError
from tributary.client.raw.batches import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_MIN_BYTES,
    DEFAULT_PARTITION_MAX_BYTES,
    READ_UNCOMMITTED,
    ProduceResult,
    RawBatches,
    fetch_request,
    fetch_results,
    fetch_timeout,
    parse_fetch_response,
    parse_produce_response,
    produce_request,
    produce_results,
)
from tributary.client.raw.wire import (
    FETCH_VERSIONS,
    PRODUCE_VERSIONS,
    decode_fetch_response,
    decode_produce_response,
    encode_produce_request,
)
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.connection import BrokerConnection
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import ProtocolError
from tributary.protocol.headers import encode_request
from tributary.protocol.messages import ApiKey, FetchResponse, ProduceResponse

DEFAULT_PRODUCE_TIMEOUT_MS = 30_000

R = TypeVar("R")
D = TypeVar("D")


def _decoded(decode: Callable[[int, BytesLike], D], version: int, frame: BytesLike, api: str, broker: int | str) -> D:
    try:
        return decode(version, frame)
    except ProtocolError as exc:
        message = f"malformed {api} v{version} response from broker {broker}: {exc}"
        raise KafkaProtocolError(message, broker=broker) from exc


class RawClient:
    """Fetch and produce raw batches through a :class:`~client.cluster.Cluster`."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def fetch(
        self,
        broker_id: int,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
        min_bytes: int = DEFAULT_MIN_BYTES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
        isolation_level: int = READ_UNCOMMITTED,
        timeout: float | None = None,
    ) -> dict[TopicPartition, RawBatches | KafkaError]:
        """One Fetch to ``broker_id`` for every partition in ``offsets`` (each
        from its offset). A connection failure becomes every partition's error."""
        request = fetch_request(
            offsets,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            partition_max_bytes=partition_max_bytes,
            isolation_level=isolation_level,
        )
        if timeout is None:
            timeout = fetch_timeout(self.cluster.config.request_timeout, max_wait_ms)
        try:
            conn = await self.cluster.connection(broker_id)
            version = conn.api_version(ApiKey.FETCH)
            if version not in FETCH_VERSIONS:  # a version the fast path does not read
                response: FetchResponse = await conn.request(request, version=version, timeout=timeout)
                return self._noted(parse_fetch_response(response, offsets, broker_id))
            client_id = conn.config.client_id
            # Writable: the mirror stamps the fetched batches in place (mirror/batches.py).
            frame = await conn.exchange(
                ApiKey.FETCH,
                version,
                lambda cid: encode_request(request, version, cid, client_id),
                timeout=timeout,
                writable_response=True,
            )
            assert frame is not None
            _, error_code, shares = _decoded(decode_fetch_response, version, frame, "Fetch", broker_id)
        except KafkaError as exc:
            self.cluster.note_error(exc)
            return dict.fromkeys(offsets, exc)
        return self._noted(fetch_results(error_code, shares, offsets, broker_id))

    def _noted(self, results: dict[TopicPartition, R]) -> dict[TopicPartition, R]:
        """``results`` as they are, once the cluster has seen each error among them (a stale
        leader, say, refreshes its metadata)."""
        for result in results.values():
            if isinstance(result, KafkaError):
                self.cluster.note_error(result)
        return results

    async def fetch_many(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
        min_bytes: int = DEFAULT_MIN_BYTES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> dict[TopicPartition, RawBatches | KafkaError]:
        """Fetch partitions from their leaders: one request per leader, concurrently."""
        results: dict[TopicPartition, RawBatches | KafkaError] = {}
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, offset in offsets.items():
            try:
                leader = await self.cluster.leader_for(tp.topic, tp.partition)
            except KafkaError as exc:
                results[tp] = exc
                continue
            by_leader.setdefault(leader, {})[tp] = offset

        async def one(leader: int, subset: dict[TopicPartition, int]) -> None:
            results.update(
                await self.fetch(
                    leader,
                    subset,
                    max_wait_ms=max_wait_ms,
                    min_bytes=min_bytes,
                    max_bytes=max_bytes,
                    partition_max_bytes=partition_max_bytes,
                    isolation_level=isolation_level,
                )
            )

        async with trio.open_nursery() as nursery:
            for leader, subset in by_leader.items():
                nursery.start_soon(one, leader, subset)
        return results

    async def fetch_partition(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
        min_bytes: int = DEFAULT_MIN_BYTES,
        max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> RawBatches:
        """One partition's batches from ``offset``, from its leader; errors are raised
        (OffsetOutOfRangeError, NotLeaderError, KafkaConnectionError, ...)."""
        leader = await self.cluster.leader_for(topic, partition)
        tp = TopicPartition(topic, partition)
        result = (
            await self.fetch(
                leader,
                {tp: offset},
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                partition_max_bytes=max_bytes,
                isolation_level=isolation_level,
            )
        )[tp]
        if isinstance(result, KafkaError):
            raise result
        return result

    async def produce(
        self,
        broker_id: int,
        batches: Mapping[TopicPartition, BytesLike],
        *,
        acks: int = -1,
        timeout_ms: int = DEFAULT_PRODUCE_TIMEOUT_MS,
        transactional_id: str | None = None,
        timeout: float | None = None,
        on_queued: Callable[[], object] | None = None,
    ) -> dict[TopicPartition, ProduceResult | KafkaError]:
        """One Produce to ``broker_id``: one record batch (bytes, sent unchanged)
        per partition, as Kafka requires. ``acks=0`` gets no response: every
        partition's result is then ``ProduceResult(-1)`` once the request is written.
        ``on_queued`` is called once the request has its place in the connection's send
        order (see :meth:`BrokerConnection.request`): a caller keeping several batches of a
        partition in flight starts the next request only then."""
        if timeout is None:
            timeout = self.cluster.config.request_timeout + timeout_ms / 1000
        try:
            conn = await self.cluster.connection(broker_id)
            version = conn.api_version(ApiKey.PRODUCE)
            if version not in PRODUCE_VERSIONS:  # a version the fast path does not write
                request = produce_request(
                    {tp: bytes(b) for tp, b in batches.items()},
                    acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id,
                )  # fmt: skip
                response: ProduceResponse | None = await conn.request(
                    request, version=version, timeout=timeout, expect_response=acks != 0, on_queued=on_queued
                )
                if response is None:
                    return dict.fromkeys(batches, ProduceResult(-1))
                return self._noted(parse_produce_response(response, batches, broker_id))
            encode = _produce_encoder(version, conn.config.client_id, batches, acks, timeout_ms, transactional_id)
            frame = await conn.exchange(
                ApiKey.PRODUCE, version, encode, timeout=timeout, expect_response=acks != 0, on_queued=on_queued
            )
            if frame is None:
                return dict.fromkeys(batches, ProduceResult(-1))
            _, answers = _decoded(decode_produce_response, version, frame, "Produce", broker_id)
        except KafkaError as exc:
            self.cluster.note_error(exc)
            return dict.fromkeys(batches, exc)
        return self._noted(produce_results(answers, batches, broker_id))

    def start_produce(
        self,
        conn: BrokerConnection,
        batches: Mapping[TopicPartition, BytesLike],
        on_results: Callable[[dict[TopicPartition, ProduceResult | KafkaError]], object],
        *,
        timeout_ms: int = DEFAULT_PRODUCE_TIMEOUT_MS,
        timeout: float | None = None,
    ) -> bool:
        """:meth:`produce` (acks=all) on an open connection without waiting (:func:`start_produce`):
        ``on_results`` gets the results per partition once it is answered, from the connection's
        reader task. False, and nothing sent, when that cannot be done here and now (the
        connection is closed or has no free slot, or the broker wants a Produce version the
        fast path does not write): then :meth:`produce` is the way."""
        if timeout is None:
            timeout = self.cluster.config.request_timeout + timeout_ms / 1000
        cluster = self.cluster

        def answered(outcome: dict[TopicPartition, ProduceResult | KafkaError] | KafkaError) -> None:
            if isinstance(outcome, KafkaError):
                cluster.note_error(outcome)
                on_results(dict.fromkeys(batches, outcome))
            else:
                on_results(self._noted(outcome))

        return start_produce(conn, batches, answered, acks=-1, timeout_ms=timeout_ms, timeout=timeout)

    async def produce_partition(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        *,
        acks: int = -1,
        timeout_ms: int = DEFAULT_PRODUCE_TIMEOUT_MS,
        transactional_id: str | None = None,
    ) -> ProduceResult:
        """Produce one batch to a partition's leader; errors are raised."""
        leader = await self.cluster.leader_for(topic, partition)
        tp = TopicPartition(topic, partition)
        result = (
            await self.produce(leader, {tp: batch}, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id)
        )[tp]
        if isinstance(result, KafkaError):
            raise result
        return result


def _produce_encoder(  # noqa: PLR0917 (the request's fields, in their order)
    version: int,
    client_id: str | None,
    batches: Mapping[TopicPartition, BytesLike],
    acks: int,
    timeout_ms: int,
    transactional_id: str | None,
) -> Callable[[int], bytes]:
    """The Produce frame for a correlation id (what BrokerConnection.exchange and start take)."""

    def encode(correlation_id: int) -> bytes:
        return encode_produce_request(
            version, correlation_id, client_id, batches,
            acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id,
        )  # fmt: skip

    return encode


def start_produce(
    conn: BrokerConnection,
    batches: Mapping[TopicPartition, BytesLike],
    on_answer: Callable[[dict[TopicPartition, ProduceResult | KafkaError] | KafkaError], object],
    *,
    acks: int,
    timeout_ms: int,
    timeout: float,
    transactional_id: str | None = None,
) -> bool:
    """One Produce of ``batches`` (one record batch per partition, sent byte for byte) on an
    open connection, without waiting: the request takes its place in the connection's send order
    before this returns, and ``on_answer`` gets, from the connection's reader task (see
    :meth:`BrokerConnection.start`), either each partition's result or error, or the one
    :class:`KafkaError` that ended the whole request (the connection lost, no answer in
    ``timeout`` seconds, a malformed answer). It must not block or raise. Partition errors are
    left for the caller to report to the cluster.

    False, and nothing sent, when that cannot be done here and now: the connection is closed
    or has no free in-flight slot, the broker wants a Produce version the raw wire code does not
    write (``PRODUCE_VERSIONS``), or ``acks`` is 0 (no answer to settle by). Both the producer's
    sender and :meth:`RawClient.start_produce` (the mirror) send through here."""
    if acks == 0 or conn.closed:
        return False
    version = conn.api_version(ApiKey.PRODUCE)
    if version not in PRODUCE_VERSIONS:
        return False
    broker_id = conn.broker
    encode = _produce_encoder(version, conn.config.client_id, batches, acks, timeout_ms, transactional_id)

    def answered(answer: bytes | KafkaError) -> None:
        if isinstance(answer, KafkaError):
            on_answer(answer)
            return
        try:
            _, answers = _decoded(decode_produce_response, version, answer, "Produce", broker_id)
        except KafkaError as exc:
            on_answer(exc)
            return
        on_answer(produce_results(answers, batches, broker_id))

    try:
        conn.start(ApiKey.PRODUCE, version, encode, answered, timeout=timeout)
    except (trio.WouldBlock, KafkaError):
        return False
    return True


__all__ = ["DEFAULT_PRODUCE_TIMEOUT_MS", "RawClient", "start_produce"]
