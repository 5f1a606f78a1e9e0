"""DeleteRecords (KIP-107): move partitions' log start offsets forward; what lies below is gone.

For each partition this broker leads: the offset asked for (-1: the high watermark) becomes the
log start offset, unless it lies past the high watermark (OFFSET_OUT_OF_RANGE, nothing changes).
Fetch and ListOffsets honour it at once, segments wholly below it are deleted, and the log start
offset checkpoint (``log-start-offset-checkpoint``) is written before the answer, so a restart
keeps it. As in Kafka, the answer waits until every live replica has dropped the records too
(followers take the leader's log start offset from their next fetch): its low watermark is the
smallest log start offset among them, and REQUEST_TIMED_OUT comes after the request's timeout.
Delete on the topic is needed (TOPIC_AUTHORIZATION_FAILED, nothing deleted), as in Kafka. A topic
whose ``cleanup.policy`` is ``compact`` alone keeps its records by policy: POLICY_VIOLATION.
"""

from __future__ import annotations

import logging

import trio

from tributary.broker.context import RequestContext
from tributary.broker.log.errors import LogError
from tributary.broker.partitions import Partition
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse

log = logging.getLogger(__name__)

#: The offset that means "up to the high watermark".
HIGH_WATERMARK = -1

Result = DeleteRecordsResponse.DeleteRecordsPartitionResult


def _delete(ctx: RequestContext, topic: str, asked: DeleteRecordsRequest.DeleteRecordsPartition) -> Partition | Result:
    """Moves one partition's log start; the partition, or the answer when refused."""
    target = ctx.broker.partitions.lookup(ctx.broker.snapshot(), topic, asked.partition_index)
    if isinstance(target, ErrorCode):
        return Result(partition_index=asked.partition_index, low_watermark=-1, error_code=target)
    plog = target.log
    if not plog.config.deletes_old_segments:
        return Result(asked.partition_index, -1, ErrorCode.POLICY_VIOLATION)
    offset = plog.high_watermark if asked.offset == HIGH_WATERMARK else asked.offset
    if offset < 0:
        return Result(asked.partition_index, -1, ErrorCode.OFFSET_OUT_OF_RANGE)
    try:
        before = plog.log_start_offset
        start = plog.advance_log_start_offset(offset)
    except LogError as exc:
        return Result(asked.partition_index, -1, exc.error_code)
    if start > before:
        log.info("%s-%d: records below %d deleted for %s", topic, asked.partition_index, start, ctx.peer)
    return target


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    broker = ctx.broker
    deadline = trio.current_time() + max(request.timeout_ms, 0) / 1000
    results: list[DeleteRecordsResponse.DeleteRecordsTopicResult] = []
    moved: list[tuple[Partition, int, Result]] = []
    deletable = ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        answers = []
        for asked in topic.partitions:
            if topic.name not in deletable:
                answers.append(Result(asked.partition_index, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            outcome = _delete(ctx, topic.name, asked)
            if isinstance(outcome, Partition):
                answer = Result(asked.partition_index, outcome.log.log_start_offset, ErrorCode.NONE)
                moved.append((outcome, outcome.log.log_start_offset, answer))
            else:
                answer = outcome
            answers.append(answer)
        results.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name, partitions=answers))
    if moved:
        # Durable before it is acknowledged: a restart must not serve the records again. On the
        # broker's thread, as the periodic checkpoints are (the log manager belongs to it).
        try:
            broker.logs.checkpoint_log_start_offsets()
        except OSError as exc:
            log.warning("cannot write the log start offset checkpoint: %s", exc)
            for _, _, answer in moved:
                answer.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            return DeleteRecordsResponse(topics=results)

    def live() -> frozenset[int]:
        return broker.snapshot().live_broker_ids

    for partition, offset, answer in moved:
        if partition.replicated and not await partition.wait_for_low_watermark(offset, deadline, live):
            answer.error_code = ErrorCode.REQUEST_TIMED_OUT if partition.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
        answer.low_watermark = partition.low_watermark(live())
    return DeleteRecordsResponse(topics=results)
