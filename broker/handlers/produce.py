"""Produce: validate and append record batches to the partitions this broker leads.

Batches are validated (header, length, CRC-32C) without decompression and
stored exactly as received. A batch that fails gets its error code and nothing
of that partition's data is appended; other partitions in the request are
unaffected. acks=0 gets no response at all, as in Kafka, and a failure then
closes the connection (the producer's only way to notice); with no replicas yet,
acks=-1 is acknowledged once the leader has appended (and flushed, when the
flush policy says so).
"""

from __future__ import annotations

import logging
import time

import trio

from tributary.broker.context import CloseConnection, RequestContext
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.log.errors import LogError, StorageError
from tributary.broker.partitions import Partition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError, UnsupportedMagicError
from tributary.protocol.messages import ProduceRequest, ProduceResponse

log = logging.getLogger(__name__)


def _error_for(exc: Exception) -> ErrorCode:
    """The code Kafka answers a refused append with; anything else is a bug and propagates."""
    if isinstance(exc, LogError):
        return exc.error_code
    if isinstance(exc, UnsupportedMagicError):
        return ErrorCode.INVALID_RECORD
    if isinstance(exc, ProtocolError):  # CorruptRecordError and any other malformed batch
        return ErrorCode.CORRUPT_MESSAGE
    raise exc


async def _append(partition: Partition, records: bytes) -> ProduceResponse.PartitionProduceResponse:
    plog = partition.log
    result = plog.append(records, partition.leader_epoch, int(time.time() * 1000))
    partition.notify_appended()
    if plog.needs_flush(int(time.time() * 1000)):
        # The flush policy says this data is acknowledged only once on disk.
        await trio.to_thread.run_sync(plog.flush)
    return ProduceResponse.PartitionProduceResponse(
        error_code=ErrorCode.NONE,
        base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time,
        log_start_offset=result.log_start_offset,
    )


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    snapshot = broker.snapshot()
    topics = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            error = ErrorCode.NONE
            if request.acks not in (0, 1, -1):
                error = ErrorCode.INVALID_REQUIRED_ACKS
            elif topic.name == OFFSETS_TOPIC:
                # Only the group coordinator writes there (as in Kafka): a foreign record
                # would be read back as group state.
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif data.records is None:
                error = ErrorCode.CORRUPT_MESSAGE
            if error:
                partitions.append(
                    ProduceResponse.PartitionProduceResponse(index=data.index, error_code=error, base_offset=-1)
                )
                continue
            target = broker.partitions.lookup(snapshot, topic.name, data.index)
            if isinstance(target, ErrorCode):
                partitions.append(
                    ProduceResponse.PartitionProduceResponse(index=data.index, error_code=target, base_offset=-1)
                )
                continue
            assert data.records is not None
            try:
                response = await _append(target, data.records)
            except Exception as exc:
                code = _error_for(exc)
                if not isinstance(exc, StorageError):  # the log says it once per incident
                    log.info("produce to %s-%d from %s refused: %s: %s", topic.name, data.index, ctx.peer, code.name,
                             exc)  # fmt: skip
                response = ProduceResponse.PartitionProduceResponse(
                    error_code=code, base_offset=-1, error_message=str(exc)
                )
            else:
                broker.metrics.bytes_in(topic.name, len(data.records))
            response.index = data.index
            partitions.append(response)
        topics.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if request.acks == 0:
        # No response can carry an error: as Kafka does, close the connection so
        # the producer notices and refreshes its metadata.
        failed = [(t.name, p.index, p.error_code) for t in topics for p in t.partition_responses if p.error_code]
        if failed:
            name, index, failed_code = failed[0]
            raise CloseConnection(f"acks=0 produce failed: {name}-{index}: {ErrorCode(failed_code).name}")
        return None
    return ProduceResponse(responses=topics)
