"""Produce: validate and append record batches to the partitions this broker leads.

Batches are validated (header, length, CRC-32C) without decompression and
stored exactly as received. A batch that fails gets its error code and nothing
of that partition's data is appended; other partitions in the request are
unaffected. acks=0 gets no response at all, as in Kafka, and a failure then
closes the connection (the producer's only way to notice).

acks=1 is answered once the leader has appended (and flushed, when the flush
policy says so). acks=-1 (all) first checks that the ISR holds at least
``min.insync.replicas`` replicas (else NOT_ENOUGH_REPLICAS, nothing appended),
then is answered once the high watermark has passed the appended batches, that
is once every in-sync replica has them; REQUEST_TIMED_OUT after the request's
timeout, NOT_LEADER_OR_FOLLOWER if leadership moved meanwhile, and
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum while it
waited (the records are written, but not as durably as asked).

Every version from 0 is served: v0-v2 exist for the clients that decide by the range
(librdkafka up to 2.11 compresses with gzip, snappy or lz4 only when v0 is in it); what
they carry is held to the same rule as v3+, so a magic 0 or 1 message set still gets
INVALID_RECORD. From v10 a NOT_LEADER_OR_FOLLOWER answer names the leader (KIP-951).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import trio

from tributary.broker.cluster.model import ClusterSnapshot
from tributary.broker.context import CloseConnection, RequestContext
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.leader_hints import HINTED_ERRORS, endpoints, leader_hint
from tributary.broker.log.errors import LogError, StorageError
from tributary.broker.log.log import AppendResult
from tributary.broker.partitions import Partition
from tributary.broker.txn.placement import TRANSACTION_STATE_TOPIC
from tributary.protocol.acl import AclOperation, ResourceType
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


def min_insync_replicas(ctx: RequestContext, topic: str) -> int:
    """The topic's ``min.insync.replicas``, else the broker's."""
    info = ctx.broker.snapshot().topics.get(topic)
    override = None if info is None else info.config.get("min.insync.replicas")
    if override is not None:
        try:
            return int(override)
        except ValueError:
            pass  # refused at creation; a foreign tool's junk falls back to the default
    return ctx.broker.config.replication.min_insync_replicas


def _refused_outright(request: ProduceRequest, topic: str, data: ProduceRequest.PartitionProduceData) -> ErrorCode:
    if request.acks not in (0, 1, -1):
        return ErrorCode.INVALID_REQUIRED_ACKS
    if topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
        # Only the coordinators write there (as in Kafka): a foreign record
        # would be read back as group or transaction state.
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if data.records is None:
        return ErrorCode.CORRUPT_MESSAGE
    return ErrorCode.NONE


def _too_few_in_sync(ctx: RequestContext, partition: Partition) -> ProduceResponse.PartitionProduceResponse | None:
    """acks=all with fewer in-sync replicas than min.insync.replicas: refused before appending."""
    state = partition.leader_state
    minimum = min_insync_replicas(ctx, partition.topic)
    if state is None or len(state.isr) >= minimum:
        return None
    return ProduceResponse.PartitionProduceResponse(
        error_code=ErrorCode.NOT_ENOUGH_REPLICAS,
        base_offset=-1,
        error_message=f"{len(state.isr)} in-sync replicas, min.insync.replicas is {minimum}",
    )


async def _await_replication(
    ctx: RequestContext,
    waits: list[tuple[Partition, int, ProduceResponse.PartitionProduceResponse]],
    deadline: float,
) -> None:
    """acks=all: hold each response until the high watermark passes its batches."""
    for partition, offset, response in waits:
        if await partition.wait_for_high_watermark(offset, deadline):
            state = partition.leader_state
            if state is not None and len(state.isr) < min_insync_replicas(ctx, partition.topic):
                response.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        elif partition.is_leader and trio.current_time() >= deadline:
            response.error_code = ErrorCode.REQUEST_TIMED_OUT
        else:
            response.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if response.error_code:
            response.base_offset = -1


def _authorized_topics(ctx: RequestContext, request: ProduceRequest) -> dict[str, ErrorCode] | None:
    """Kafka's checks, made before anything else: Write on the transactional id of a transactional
    producer (else every partition is refused), and Write on each topic (else its partitions are,
    whether or not it exists). Each topic's code, NONE where it may be written; None when there
    is nothing to check (no authorizer: everything may be written)."""
    if not ctx.broker.authorizer.enabled:
        return None
    names = {t.name for t in request.topic_data}
    tid = request.transactional_id
    if tid is not None and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(names, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    allowed = ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, names)
    return {name: ErrorCode.NONE if name in allowed else ErrorCode.TOPIC_AUTHORIZATION_FAILED for name in names}


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    return (await handle_many([(ctx, request)]))[0]


@dataclass(slots=True)
class _Append:
    """A partition's records in one request, and the response they get."""

    request: int  # which of the requests
    topic: str
    records: bytes
    response: ProduceResponse.PartitionProduceResponse


async def handle_many(requests: Sequence[tuple[RequestContext, ProduceRequest]]) -> list[ProduceResponse | None]:
    """Answer Produce requests that came one after another on one connection, in that order,
    as answering each in turn would (None for acks=0: no response).

    Each partition's records are appended together (PartitionLog.append_many: one write per
    segment, each request's outcome apart), and the flush policy is asked once per partition
    after them. Only then does an acks=all request wait for its replicas, the requests before it
    having been appended already, as Kafka's broker appends pipelined requests while earlier
    ones wait in purgatory. An acks=0 request that fails closes the connection."""
    snapshot = requests[0][0].broker.snapshot()
    now = trio.current_time()
    targets: dict[tuple[str, int], Partition | ErrorCode] = {}
    appends: dict[Partition, list[_Append]] = {}
    answers = [_place(n, ctx, request, snapshot, targets, appends) for n, (ctx, request) in enumerate(requests)]
    waits: list[list[tuple[Partition, int, ProduceResponse.PartitionProduceResponse]]] = [[] for _ in requests]
    appended = _append_all(requests, appends, waits)
    for target, items in appended:
        await _flush_if_due(requests, target, items)
    out: list[ProduceResponse | None] = []
    for (ctx, request), topics, wait in zip(requests, answers, waits, strict=True):
        if request.acks == 0:
            # No response can carry an error: as Kafka does, close the connection so
            # the producer notices and refreshes its metadata.
            failed = [(t.name, p.index, p.error_code) for t in topics for p in t.partition_responses if p.error_code]
            if failed:
                name, index, failed_code = failed[0]
                raise CloseConnection(f"acks=0 produce failed: {name}-{index}: {ErrorCode(failed_code).name}")
            out.append(None)
            continue
        if wait:
            await _await_replication(ctx, wait, now + max(request.timeout_ms, 0) / 1000)
        out.append(_with_leader_hints(ctx, ProduceResponse(responses=topics)))
    return out


def _place(  # noqa: PLR0917 (the request, and what the requests share)
    n: int,
    ctx: RequestContext,
    request: ProduceRequest,
    snapshot: ClusterSnapshot,
    targets: dict[tuple[str, int], Partition | ErrorCode],
    appends: dict[Partition, list[_Append]],
) -> list[ProduceResponse.TopicProduceResponse]:
    """Request ``n``'s answer, its partitions refused outright answered already, the others
    queued (in ``appends``) for their partition's append; ``targets``: the partitions looked up."""
    authorization = _authorized_topics(ctx, request)
    topics = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            error = _refused_outright(request, topic.name, data)
            if authorization is not None:
                error = authorization[topic.name] or error
            if error:
                partitions.append(
                    ProduceResponse.PartitionProduceResponse(index=data.index, error_code=error, base_offset=-1)
                )
                continue
            target = targets.get((topic.name, data.index))
            if target is None:
                target = targets[topic.name, data.index] = ctx.broker.partitions.lookup(
                    snapshot, topic.name, data.index
                )
            if isinstance(target, ErrorCode):
                partitions.append(
                    ProduceResponse.PartitionProduceResponse(index=data.index, error_code=target, base_offset=-1)
                )
                continue
            assert data.records is not None
            if request.acks == -1 and (too_few := _too_few_in_sync(ctx, target)) is not None:
                too_few.index = data.index
                partitions.append(too_few)
                continue
            response = ProduceResponse.PartitionProduceResponse(index=data.index, base_offset=-1)
            appends.setdefault(target, []).append(_Append(n, topic.name, data.records, response))
            partitions.append(response)
        topics.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    return topics


def _append_all(
    requests: Sequence[tuple[RequestContext, ProduceRequest]],
    appends: dict[Partition, list[_Append]],
    waits: list[list[tuple[Partition, int, ProduceResponse.PartitionProduceResponse]]],
) -> list[tuple[Partition, list[_Append]]]:
    """Each partition's records appended, in request order; the responses filled in. The
    partitions that took something, for the flush policy."""
    appended = []
    metrics = requests[0][0].broker.metrics
    for target, items in appends.items():
        now_ms = int(time.time() * 1000)
        try:
            outcomes: Sequence[object] = target.append_many([item.records for item in items], now_ms)
        except LogError as exc:  # the log closed under us, the disk failed: every part alike
            outcomes = [exc.with_traceback(None)] * len(items)
        took = []
        for item, outcome in zip(items, outcomes, strict=True):
            response = item.response
            if isinstance(outcome, Exception):
                _refused(requests[item.request][0], item, outcome)
                continue
            assert isinstance(outcome, AppendResult)
            response.base_offset = outcome.base_offset
            response.log_append_time_ms = outcome.log_append_time
            response.log_start_offset = outcome.log_start_offset
            metrics.bytes_in(item.topic, len(item.records))
            if requests[item.request][1].acks == -1 and target.replicated:
                waits[item.request].append((target, outcome.last_offset + 1, response))
            took.append(item)
        if took:
            appended.append((target, took))
    return appended


def _refused(ctx: RequestContext, item: _Append, exc: Exception) -> None:
    code = _error_for(exc)
    response = item.response
    if not isinstance(exc, StorageError):  # the log says it once per incident
        log.info("produce to %s-%d from %s refused: %s: %s", item.topic, response.index, ctx.peer, code.name, exc)
    response.error_code = code
    response.base_offset = -1
    response.log_append_time_ms = -1
    response.log_start_offset = -1
    response.error_message = str(exc)


async def _flush_if_due(
    requests: Sequence[tuple[RequestContext, ProduceRequest]], target: Partition, items: list[_Append]
) -> None:
    """The flush policy says this data is acknowledged only once on disk: flush before answering."""
    plog = target.log
    if not plog.needs_flush(int(time.time() * 1000)):
        return
    try:
        await trio.to_thread.run_sync(plog.flush)
    except LogError as exc:
        for item in items:
            _refused(requests[item.request][0], item, exc)


#: From this version a refused partition names its leader, and the response its address (KIP-951).
LEADER_HINT_VERSION = 10


def _with_leader_hints(ctx: RequestContext, response: ProduceResponse) -> ProduceResponse:
    if ctx.api_version < LEADER_HINT_VERSION:
        return response
    snapshot = ctx.broker.snapshot()
    named: set[int] = set()
    for topic in response.responses:
        for p in topic.partition_responses:
            if p.error_code in HINTED_ERRORS:
                hint = leader_hint(snapshot, topic.name, p.index)
                p.current_leader = ProduceResponse.LeaderIdAndEpoch(*hint)
                if hint.leader_id >= 0:
                    named.add(hint.leader_id)
    if named:
        response.node_endpoints = [ProduceResponse.NodeEndpoint(*e) for e in endpoints(snapshot, named, ctx.listener)]
    return response
