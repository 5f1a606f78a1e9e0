"""Raw record batches in fetch and produce requests, sans-IO.

The mirror copies batches without decompressing them and the Spark loader
reads offset ranges; both need the same few things, built here once for the
Trio client (``raw.py``, ``admin.py``) and the blocking fetcher
(``blocking.py``):

- Fetch requests and the parsing of one partition's answer into
  :class:`RawBatches`: the records bytes cut to the complete batches, and each
  batch's position and header (:func:`protocol.records.iter_batches`). A fetch
  response may end in the middle of a batch (the broker cuts at the byte
  limit); that tail is dropped. Nothing is decompressed.
- Produce requests of prepared batches and the parsing of their answers.
- ListOffsets requests (earliest, latest, by timestamp) and their answers.

Nothing here imports trio.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from tributary.client.errors import KafkaError, OffsetOutOfRangeError, error_for
from tributary.client.raw.wire import PartitionFetched, PartitionProduced
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ProduceRequest,
    ProduceResponse,
)
from tributary.protocol.records import BatchHeader, ControlType, Record, control_type, iter_batches, iter_records

#: ListOffsets timestamps with a special meaning.
LATEST = -1
EARLIEST = -2
#: Fetch isolation levels.
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

DEFAULT_MAX_WAIT_MS = 500
DEFAULT_MIN_BYTES = 1
DEFAULT_MAX_BYTES = 50 * 1024 * 1024  # fetch.max.bytes
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024  # max.partition.fetch.bytes


@dataclass(frozen=True, slots=True)
class RawBatches:
    """One partition's share of a fetch response, undecoded.

    ``records`` holds complete batches only, exactly as the broker sent them
    (its baseOffset and partitionLeaderEpoch are the broker's);
    ``batches`` lists ``(position in records, header)`` for each. The first
    batch may start before ``fetch_offset``: brokers return the whole batch
    that holds the offset. ``truncated_bytes`` counts the bytes of an
    incomplete trailing batch that were dropped; when it is non-zero and
    ``batches`` is empty, the next batch is larger than the fetch's byte limit."""

    topic: str
    partition: int
    fetch_offset: int
    #: A view of the response frame on the raw client's fast path (``wire.py``), else bytes.
    records: bytes | memoryview
    batches: tuple[tuple[int, BatchHeader], ...]
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    truncated_bytes: int = 0
    #: With isolation READ_COMMITTED: ``(producer id, first offset)`` of each aborted
    #: transaction overlapping the fetched range, for the reader to filter out.
    aborted_transactions: tuple[tuple[int, int], ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def next_offset(self) -> int:
        """Where the next fetch continues: after the last complete batch."""
        return self.batches[-1][1].next_offset if self.batches else self.fetch_offset

    def __len__(self) -> int:
        return len(self.batches)

    def batch_bytes(self) -> Iterator[tuple[BatchHeader, bytes | memoryview]]:
        """Each batch as ``(header, its bytes)``: what a raw producer sends on."""
        records = self.records
        for position, header in self.batches:
            yield header, records[position : position + header.size]

    def committed_batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """The batches a committed-only reader sees, as ``(position in records, header)``:
        never a control batch (a transaction marker), never a batch of an aborted transaction
        (see :class:`AbortedTransactions`)."""
        if not self.aborted_transactions:  # the usual fetch: only the markers are left out
            for position, header in self.batches:
                if not header.is_control:
                    yield position, header
            return
        aborted = AbortedTransactions(self.aborted_transactions)
        for position, header in self.batches:
            if not aborted.drops(header, self.records, position):
                yield position, header

    def committed_batch_bytes(self) -> Iterator[tuple[BatchHeader, bytes | memoryview]]:
        """:meth:`committed_batches` as ``(header, bytes)``."""
        records = self.records
        for position, header in self.committed_batches():
            yield header, records[position : position + header.size]

    def iter_records(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        include_control: bool = False,
        committed_only: bool = False,
    ) -> Iterator[Record]:
        """The records with ``start <= offset < end``, decompressed and decoded.

        Control records (transaction markers) are skipped unless asked for; with
        ``committed_only`` (a READ_COMMITTED fetch) so are the records of aborted transactions."""
        low = self.fetch_offset if start is None else start
        aborted = AbortedTransactions(self.aborted_transactions) if committed_only else None
        for position, header in self.batches:
            if aborted is not None and aborted.drops(header, self.records, position):
                continue
            if header.next_offset <= low or (end is not None and header.base_offset >= end):
                continue
            if header.is_control and not include_control:
                continue
            for record in iter_records(self.records, position):
                if record.offset >= low and (end is None or record.offset < end):
                    yield record


class AbortedTransactions:
    """Which batches of a READ_COMMITTED fetch answer belong to aborted transactions, as Kafka's
    consumer decides it (sans-IO: fed the batches in order, one at a time).

    The broker returns data up to the last stable offset and ``(producer id, first offset)`` of
    each aborted transaction overlapping it. A producer's transactional batches are dropped from
    its aborted transaction's first offset until its ABORT marker; control batches (markers) are
    dropped always."""

    __slots__ = ("_aborted", "_next", "_pending")

    def __init__(self, aborted_transactions: Iterable[tuple[int, int]]) -> None:
        self._pending = sorted(aborted_transactions, key=lambda t: t[1])
        self._next = 0
        self._aborted: set[int] = set()

    def drops(self, header: BatchHeader, data: BytesLike, position: int = 0) -> bool:
        """Whether a reader of committed data skips this batch (``data[position:]`` holds it)."""
        pending = self._pending
        while self._next < len(pending) and pending[self._next][1] <= header.last_offset:
            self._aborted.add(pending[self._next][0])
            self._next += 1
        if header.is_control:
            if header.producer_id in self._aborted and control_type(data, position) is ControlType.ABORT:
                self._aborted.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._aborted


def fetch_request(
    offsets: Mapping[TopicPartition, int],
    *,
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
    min_bytes: int = DEFAULT_MIN_BYTES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
    isolation_level: int = READ_UNCOMMITTED,
) -> FetchRequest:
    """A full (sessionless) consumer fetch of each partition from its offset."""
    topics: dict[str, FetchRequest.FetchTopic] = {}
    for tp, offset in offsets.items():
        topic = topics.setdefault(tp.topic, FetchRequest.FetchTopic(topic=tp.topic))
        topic.partitions.append(
            FetchRequest.FetchPartition(
                partition=tp.partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes
            )
        )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,  # no fetch session: every request names every partition
        topics=list(topics.values()),
    )


def fetch_timeout(request_timeout: float, max_wait_ms: int) -> float:
    """A fetch's request timeout: the configured one on top of the long poll."""
    return request_timeout + max(max_wait_ms, 0) / 1000


def raw_batches(topic: str, data: FetchResponse.PartitionData, fetch_offset: int) -> RawBatches:
    """The complete batches of one partition's fetch answer (whose error code is NONE)."""
    return batches_of(_share(topic, data), fetch_offset)


def _share(topic: str, data: FetchResponse.PartitionData) -> PartitionFetched:
    return PartitionFetched(
        topic, data.partition_index, data.error_code, data.high_watermark, data.last_stable_offset,
        data.log_start_offset, tuple((t.producer_id, t.first_offset) for t in data.aborted_transactions or ()),
        data.records or b"",
    )  # fmt: skip


def batches_of(share: PartitionFetched, fetch_offset: int) -> RawBatches:
    """The complete batches of one partition's share of a fetch answer (error code NONE);
    ``records`` stays the object it was (a view of the frame is not copied)."""
    records = share.records
    batches = tuple(iter_batches(records))
    end = batches[-1][0] + batches[-1][1].size if batches else 0
    return RawBatches(
        topic=share.topic,
        partition=share.partition,
        fetch_offset=fetch_offset,
        records=records[:end] if end != len(records) else records,
        batches=batches,
        high_watermark=share.high_watermark,
        log_start_offset=share.log_start_offset,
        last_stable_offset=share.last_stable_offset,
        truncated_bytes=len(records) - end,
        aborted_transactions=share.aborted_transactions,
    )


def fetch_error(topic: str, data: FetchResponse.PartitionData, fetch_offset: int, broker: int | str) -> KafkaError:
    """The exception for a partition's fetch error code, naming where and what."""
    return share_error(_share(topic, data), fetch_offset, broker)


def share_error(share: PartitionFetched, fetch_offset: int, broker: int | str) -> KafkaError:
    """:func:`fetch_error` for a partition's share as :mod:`wire` reads it."""
    code, topic, partition = share.error_code, share.topic, share.partition
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
        bounds = ""
        if share.log_start_offset >= 0 and share.high_watermark >= 0:
            bounds = f": the log holds [{share.log_start_offset}, {share.high_watermark})"
        return OffsetOutOfRangeError(
            f"fetch offset {fetch_offset} of {topic}-{partition} is out of range on broker {broker}{bounds}",
            offset=fetch_offset,
            log_start_offset=share.log_start_offset if share.log_start_offset >= 0 else None,
            high_watermark=share.high_watermark if share.high_watermark >= 0 else None,
            topic=topic,
            partition=partition,
            broker=broker,
        )
    return error_for(code, topic=topic, partition=partition, broker=broker, context=f"fetch at offset {fetch_offset}")


def parse_fetch_response(
    response: FetchResponse, offsets: Mapping[TopicPartition, int], broker: int | str
) -> dict[TopicPartition, RawBatches | KafkaError]:
    """Each requested partition's batches or error (see :func:`fetch_results`)."""
    shares = [_share(topic.topic, data) for topic in response.responses for data in topic.partitions]
    return fetch_results(response.error_code, shares, offsets, broker)


def fetch_results(
    error_code: int, shares: Iterable[PartitionFetched], offsets: Mapping[TopicPartition, int], broker: int | str
) -> dict[TopicPartition, RawBatches | KafkaError]:
    """Each requested partition's batches or error. A top-level error applies to all;
    a partition the response leaves out comes back empty, with unknown bounds (-1)."""
    results: dict[TopicPartition, RawBatches | KafkaError] = {}
    if error_code:
        for tp in offsets:
            results[tp] = error_for(error_code, topic=tp.topic, partition=tp.partition, broker=broker)
        return results
    for share in shares:
        tp = TopicPartition(share.topic, share.partition)
        offset = offsets.get(tp)
        if offset is None:
            continue
        results[tp] = share_error(share, offset, broker) if share.error_code else batches_of(share, offset)
    for tp, offset in offsets.items():
        if tp not in results:
            # Kafka names every partition of a full fetch; some brokers (Tansu 0.6, when
            # asked not to wait) leave out those without data. Nothing fetched, bounds unknown.
            results[tp] = RawBatches(tp.topic, tp.partition, offset, b"", (), -1, -1, -1)
    return results


# --- produce -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """A partition's answer to a produce: the first offset assigned to the batch
    (-1 when acks=0), the broker's append time (-1 unless the topic uses log
    append time) and the log start offset."""

    base_offset: int
    log_append_time_ms: int = -1
    log_start_offset: int = -1


def produce_request(
    batches: Mapping[TopicPartition, bytes], *, acks: int, timeout_ms: int, transactional_id: str | None = None
) -> ProduceRequest:
    """A produce of prepared record batches, sent byte for byte.

    Kafka accepts exactly one batch per partition per request (v3+)."""
    if acks not in (-1, 0, 1):
        raise ValueError(f"acks must be -1 (all), 0 or 1, not {acks}")
    topics: dict[str, ProduceRequest.TopicProduceData] = {}
    for tp, records in batches.items():
        topic = topics.setdefault(tp.topic, ProduceRequest.TopicProduceData(name=tp.topic))
        topic.partition_data.append(ProduceRequest.PartitionProduceData(index=tp.partition, records=records))
    return ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=list(topics.values())
    )


def parse_produce_response(
    response: ProduceResponse, batches: Mapping[TopicPartition, object], broker: int | str
) -> dict[TopicPartition, ProduceResult | KafkaError]:
    answers = [
        PartitionProduced(
            topic.name, p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset,
            p.error_message, tuple((e.batch_index, e.batch_index_error_message) for e in p.record_errors),
        )
        for topic in response.responses
        for p in topic.partition_responses
    ]  # fmt: skip
    return produce_results(answers, batches, broker)


def produce_results(
    answers: Iterable[PartitionProduced], batches: Mapping[TopicPartition, object], broker: int | str
) -> dict[TopicPartition, ProduceResult | KafkaError]:
    """Each produced partition's result or error; one the broker left out is an error."""
    results: dict[TopicPartition, ProduceResult | KafkaError] = {}
    for p in answers:
        tp = TopicPartition(p.topic, p.partition)
        if tp not in batches:
            continue
        if p.error_code:
            details = [p.error_message] if p.error_message else []
            details += [f"batch {index}: {message}" for index, message in p.record_errors]
            results[tp] = error_for(
                p.error_code, topic=tp.topic, partition=tp.partition, broker=broker,
                detail="; ".join(details) or None, context="produce",
            )  # fmt: skip
        else:
            results[tp] = ProduceResult(p.base_offset, p.log_append_time_ms, p.log_start_offset)
    for tp in batches:
        if tp not in results:
            results[tp] = KafkaError(f"broker {broker} left {tp} out of its produce response", topic=tp.topic,
                                     partition=tp.partition, broker=broker)  # fmt: skip
    return results


# --- list offsets --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """A ListOffsets answer: for EARLIEST/LATEST the offset; for a timestamp the
    first offset whose timestamp is at or after it and that record's timestamp
    (offset -1 when no record is that recent)."""

    offset: int
    timestamp: int = -1
    leader_epoch: int = -1


def list_offsets_request(
    specs: Mapping[TopicPartition, int], *, isolation_level: int = READ_UNCOMMITTED
) -> ListOffsetsRequest:
    """``specs`` maps each partition to :data:`EARLIEST`, :data:`LATEST` or a timestamp in ms."""
    topics: dict[str, ListOffsetsRequest.ListOffsetsTopic] = {}
    for tp, spec in specs.items():
        topic = topics.setdefault(tp.topic, ListOffsetsRequest.ListOffsetsTopic(name=tp.topic))
        topic.partitions.append(ListOffsetsRequest.ListOffsetsPartition(partition_index=tp.partition, timestamp=spec))
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=list(topics.values()))


def parse_list_offsets_response(
    response: ListOffsetsResponse, specs: Mapping[TopicPartition, int], broker: int | str
) -> dict[TopicPartition, ListedOffset | KafkaError]:
    results: dict[TopicPartition, ListedOffset | KafkaError] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp not in specs:
                continue
            if p.error_code:
                results[tp] = error_for(
                    p.error_code, topic=tp.topic, partition=tp.partition, broker=broker, context="list offsets"
                )
            else:
                offset = p.offset if p.offset != -1 or not p.old_style_offsets else p.old_style_offsets[0]
                results[tp] = ListedOffset(offset, p.timestamp, p.leader_epoch)
    for tp in specs:
        if tp not in results:
            results[tp] = KafkaError(f"broker {broker} left {tp} out of its ListOffsets response", topic=tp.topic,
                                     partition=tp.partition, broker=broker)  # fmt: skip
    return results


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_WAIT_MS",
    "DEFAULT_MIN_BYTES",
    "DEFAULT_PARTITION_MAX_BYTES",
    "EARLIEST",
    "LATEST",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "ListedOffset",
    "ProduceResult",
    "RawBatches",
    "fetch_error",
    "fetch_request",
    "fetch_timeout",
    "list_offsets_request",
    "batches_of",
    "fetch_results",
    "parse_fetch_response",
    "parse_list_offsets_response",
    "parse_produce_response",
    "produce_request",
    "produce_results",
    "share_error",
    "raw_batches",
]
