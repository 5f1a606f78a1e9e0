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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack

import trio

from tributary.broker.context import RequestContext
from tributary.broker.log.errors import LogClosedError, OffsetOutOfRangeError, StorageError
from tributary.broker.log.log import FileRegion, ReadResult
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


def _requested(request: FetchRequest) -> Iterator[tuple[str, FetchRequest.FetchPartition]]:
    for topic in request.topics:
        for partition in topic.partitions:
            yield topic.topic, partition


def _readable_topics(ctx: RequestContext, request: FetchRequest) -> set[str]:
    """The topics the request may read: all of them for a follower with ClusterAction on the
    Cluster (none without it), Read on each for a consumer (Kafka's checks)."""
    names = {t.topic for t in request.topics}
    if request.replica_id >= 0:
        return names if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else set()
    return ctx.authorized(AclOperation.READ, ResourceType.TOPIC, names)


def _read_all(
    ctx: RequestContext, request: FetchRequest, pins: ExitStack, readable_topics: set[str]
) -> tuple[list[FetchResponse.FetchableTopicResponse], int, bool, list[Partition]]:
    """One pass over the requested partitions: (topics, bytes, any error, partitions read)."""
    broker = ctx.broker
    budget = request.max_bytes
    follower = request.replica_id if request.replica_id >= 0 else None
    isolation = (
        Isolation.READ_COMMITTED
        if follower is None and request.isolation_level == Isolation.READ_COMMITTED
        else Isolation.READ_UNCOMMITTED
    )
    total = 0
    errors = False
    readable: list[Partition] = []
    topics: dict[str, FetchResponse.FetchableTopicResponse] = {}
    for name, req in _requested(request):
        out = FetchResponse.PartitionData(
            partition_index=req.partition,
            high_watermark=-1,
            records=b"",
            aborted_transactions=[] if isolation == Isolation.READ_COMMITTED else None,
        )
        topics.setdefault(name, FetchResponse.FetchableTopicResponse(topic=name)).partitions.append(out)
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
        if follower is not None:
            # The leader learns the follower's log end from where it asks to read, before
            # answering, so the high watermark sent back already counts this fetch.
            broker.replicas.follower_fetched(target, follower, req.fetch_offset)
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
            return FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=topics)
        # Not enough yet: let go of the pinned segments while waiting, then read again.
        pins.close()
        await _wait_for_append(readable, deadline)
