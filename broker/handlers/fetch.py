"""Fetch: serve log regions with sendfile, long-polling until min_bytes arrive.

Reads start at the batch containing the fetch offset and return whole batches
only; the first partition that has data returns at least one whole batch even
when it is larger than the limits (KIP-74), so a consumer never stalls on a big
batch. Fetch sessions (KIP-227) are declined: session id 0 tells the client to
send full fetch requests, and a full response names every requested partition.

``isolation_level`` 1 (read_committed) reads up to the partition's last stable offset and
names the aborted transactions whose data overlaps what is returned (from the segments'
``.txnindex``); the client drops those batches. read_uncommitted reads up to the high
watermark, and followers up to the log end; every answer reports both bounds.

Waiting is woken by appends, not by polling: the handler registers one event
with every partition it reads and sleeps until an append sets it or
max_wait_ms passes.

Newer versions: v12 checks the epoch of the last batch the fetcher holds
against this log (KIP-320, as OffsetForLeaderEpoch does) and answers a
diverging epoch instead of records when that log was cut under it; v13 names
topics by id (UNKNOWN_TOPIC_ID for an id nobody knows); v15 moves the replica id
into a tagged ReplicaState; v12/v16 name the leader on NOT_LEADER_OR_FOLLOWER
(KIP-951, see ``leader_hints``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack

import trio

from tributary.broker.context import RequestContext
from tributary.broker.leader_hints import HINTED_ERRORS, endpoints, leader_hint
from tributary.broker.log.errors import LogClosedError, OffsetOutOfRangeError, StorageError
from tributary.broker.log.log import FileRegion, PartitionLog, ReadResult
from tributary.broker.log.reads import Isolation
from tributary.broker.partitions import Partition, leader_epoch_error
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import FetchRequest, FetchResponse


class FileRecords:
    """A partition's records in a fetch response: file regions sent with sendfile."""

    __slots__ = ("regions", "size")

    def __init__(self, regions: list[FileRegion]) -> None:
        self.regions = regions
        self.size = sum(r.size for r in regions)

    def __len__(self) -> int:
        return self.size


#: From this version the fetcher may send the epoch of the last batch it holds (KIP-320).
DIVERGING_EPOCH_VERSION = 12
#: From this version topics are named by id (KIP-516).
TOPIC_ID_VERSION = 13
#: From this version the replica id travels in the tagged ReplicaState.
REPLICA_STATE_VERSION = 15
#: From this version the response carries the addresses of the leaders it names (KIP-951).
NODE_ENDPOINTS_VERSION = 16


def _requested(
    ctx: RequestContext, request: FetchRequest
) -> Iterator[tuple[int, str | None, FetchRequest.FetchTopic, FetchRequest.FetchPartition]]:
    """(topic's position in the request, its name or None for an unknown id, topic, partition)."""
    snapshot = ctx.broker.snapshot()
    by_id = ctx.api_version >= TOPIC_ID_VERSION
    for position, topic in enumerate(request.topics):
        name: str | None = topic.topic
        if by_id:
            info = snapshot.topic_by_uuid(topic.topic_id)
            name = None if info is None else info.name
        for partition in topic.partitions:
            yield position, name, topic, partition


def replica_id(ctx: RequestContext, request: FetchRequest) -> int:
    return request.replica_state.replica_id if ctx.api_version >= REPLICA_STATE_VERSION else request.replica_id


def _diverging(plog: PartitionLog, req: FetchRequest.FetchPartition) -> FetchResponse.EpochEndOffset | None:
    """Kafka's check of a fetch's last fetched epoch: the fetcher's log diverges from this one
    when this log does not know that epoch or ends it before the fetch offset. The answer is
    where this log's largest epoch not above it ends, for the fetcher to truncate to."""
    epoch, end = plog.end_offset_for_epoch(req.last_fetched_epoch)
    if epoch < req.last_fetched_epoch or end < req.fetch_offset:
        return FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end)
    return None


def _answered_divergence(
    plog: PartitionLog, req: FetchRequest.FetchPartition, out: FetchResponse.PartitionData
) -> bool:
    """Whether the fetcher's log diverges from this one (v12+, when it says which epoch it last
    fetched): then ``out`` carries where, and no records."""
    diverging = _diverging(plog, req) if req.last_fetched_epoch >= 0 else None
    if diverging is None:
        return False
    out.diverging_epoch = diverging
    out.high_watermark, out.last_stable_offset = plog.visible_end_offset(), plog.last_stable_offset
    return True


def _readable_topics(ctx: RequestContext, request: FetchRequest) -> set[str]:
    """The topics the request may read: all of them for a follower with ClusterAction on the
    Cluster (none without it), Read on each for a consumer (Kafka's checks)."""
    names = {name for _, name, _, _ in _requested(ctx, request) if name is not None}
    if replica_id(ctx, request) >= 0:
        return names if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else set()
    return ctx.authorized(AclOperation.READ, ResourceType.TOPIC, names)


def _read_all(
    ctx: RequestContext, request: FetchRequest, pins: ExitStack, readable_topics: set[str]
) -> tuple[list[FetchResponse.FetchableTopicResponse], int, bool, list[Partition]]:
    """One pass over the requested partitions: (topics, bytes, any error, partitions read)."""
    broker = ctx.broker
    budget = request.max_bytes
    asked_by = replica_id(ctx, request)
    follower = asked_by if asked_by >= 0 else None
    isolation = (
        Isolation.READ_COMMITTED
        if follower is None and request.isolation_level == Isolation.READ_COMMITTED
        else Isolation.READ_UNCOMMITTED
    )
    total = 0
    errors = False
    readable: list[Partition] = []
    topics: dict[int, FetchResponse.FetchableTopicResponse] = {}
    for position, name, topic, req in _requested(ctx, request):
        out = FetchResponse.PartitionData(
            partition_index=req.partition,
            high_watermark=-1,
            records=b"",
            aborted_transactions=[] if isolation == Isolation.READ_COMMITTED else None,
        )
        answer = topics.setdefault(
            position, FetchResponse.FetchableTopicResponse(topic=name or topic.topic, topic_id=topic.topic_id)
        )
        answer.partitions.append(out)
        if name is None:
            out.error_code, errors = ErrorCode.UNKNOWN_TOPIC_ID, True
            continue
        if name not in readable_topics:
            out.error_code, errors = ErrorCode.TOPIC_AUTHORIZATION_FAILED, True
            continue
        target = _partition(ctx, name, req, follower)
        if isinstance(target, ErrorCode):
            out.error_code, errors = target, True
            continue
        readable.append(target)
        plog = target.log
        out.log_start_offset = plog.log_start_offset
        if ctx.api_version >= DIVERGING_EPOCH_VERSION and _answered_divergence(plog, req, out):
            errors = True  # answered at once, like an error: the fetcher must truncate first
            continue
        if follower is not None:
            # The leader learns the follower's log end from where it asks to read, before
            # answering, so the high watermark sent back already counts this fetch.
            broker.replicas.follower_fetched(target, follower, req.fetch_offset, req.log_start_offset)
        out.high_watermark = plog.visible_end_offset()
        out.last_stable_offset = plog.last_stable_offset
        # A follower copies the whole log; consumers see what every in-sync replica has, and
        # read_committed consumers only the transactions already decided.
        read_end = plog.log_end_offset if follower is not None else plog.visible_end_offset(isolation)
        limit = min(req.partition_max_bytes, budget)
        if limit <= 0 and total > 0:
            continue
        try:
            result: ReadResult = pins.enter_context(
                plog.read(req.fetch_offset, max(limit, 0), max_offset=read_end, min_one_batch=total == 0)
            )
        except (OffsetOutOfRangeError, LogClosedError, StorageError) as exc:
            out.error_code, errors = exc.error_code, True
            continue
        if isolation == Isolation.READ_COMMITTED:
            # The client drops these producers' batches itself (the broker never rereads them).
            out.aborted_transactions = [
                FetchResponse.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                for t in (plog.aborted_transactions(req.fetch_offset, result.next_offset) if result.size else ())
            ]
        if result.size:
            out.records = FileRecords(list(result.regions))  # type: ignore[assignment]
            total += result.size
            budget -= result.size
    return list(topics.values()), total, errors, readable


def _partition(
    ctx: RequestContext, topic: str, req: FetchRequest.FetchPartition, follower: int | None
) -> Partition | ErrorCode:
    """The led partition a fetch may read, or why not: not the leader, a fenced or unknown
    leader epoch (KIP-320: the client's view of the leadership is older or newer than ours),
    or a follower fetching a partition it is not a replica of."""
    target = ctx.broker.partitions.lookup(ctx.broker.snapshot(), topic, req.partition)
    if isinstance(target, ErrorCode):
        return target
    if (code := leader_epoch_error(req.current_leader_epoch, target.leader_epoch)) is not None:
        return code
    if follower is not None and follower not in target.replicas:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return target


def _count_bytes_out(ctx: RequestContext, topics: list[FetchResponse.FetchableTopicResponse]) -> None:
    metrics = ctx.broker.metrics
    for topic in topics:
        size = sum(len(p.records) for p in topic.partitions if p.records)
        if size:
            metrics.bytes_out(topic.topic, size)


async def _wait_for_append(partitions: Iterable[Partition], deadline: float) -> None:
    event = trio.Event()
    watched = list(partitions)
    for p in watched:
        p.watch(event)
    try:
        with trio.move_on_at(deadline):
            await event.wait()
    finally:
        for p in watched:
            p.unwatch(event)


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    if ctx.api_version >= 7 and request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
    readable_topics = _readable_topics(ctx, request)
    while True:
        pins = ExitStack()
        try:
            topics, total, errors, readable = _read_all(ctx, request, pins, readable_topics)
        except BaseException:
            pins.close()
            raise
        if total >= request.min_bytes or errors or not readable or trio.current_time() >= deadline:
            ctx.after_send.append(pins.close)
            if total:
                _count_bytes_out(ctx, topics)
            return _with_leader_hints(ctx, FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=topics))
        # Not enough yet: let go of the pinned segments while waiting, then read again.
        pins.close()
        await _wait_for_append(readable, deadline)


def _with_leader_hints(ctx: RequestContext, response: FetchResponse) -> FetchResponse:
    """KIP-951: a partition this broker does not lead (any more) names the leader it knows of."""
    if ctx.api_version < DIVERGING_EPOCH_VERSION:
        return response
    snapshot = ctx.broker.snapshot()
    named: set[int] = set()
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code in HINTED_ERRORS:
                hint = leader_hint(snapshot, topic.topic, p.partition_index)
                p.current_leader = FetchResponse.LeaderIdAndEpoch(*hint)
                if hint.leader_id >= 0:
                    named.add(hint.leader_id)
    if ctx.api_version >= NODE_ENDPOINTS_VERSION:
        response.node_endpoints = [FetchResponse.NodeEndpoint(*e) for e in endpoints(snapshot, named, ctx.listener)]
    return response
