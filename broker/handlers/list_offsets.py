"""ListOffsets: earliest, latest, or the first offset at or after a timestamp."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.partitions import leader_epoch_error
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ListOffsetsRequest, ListOffsetsResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    snapshot = broker.snapshot()
    topics = []
    for topic in request.topics:
        partitions = []
        for req in topic.partitions:
            out = ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=req.partition_index)
            partitions.append(out)
            target = broker.partitions.lookup(snapshot, topic.name, req.partition_index)
            if isinstance(target, ErrorCode):
                out.error_code = target
                continue
            if (code := leader_epoch_error(req.current_leader_epoch, target.leader_epoch)) is not None:
                out.error_code = code
                continue
            plog = target.log
            out.leader_epoch = target.leader_epoch
            if req.timestamp == LATEST:
                out.offset = plog.visible_end_offset()
            elif req.timestamp == EARLIEST:
                out.offset = plog.log_start_offset
            elif req.timestamp < 0:
                out.error_code = ErrorCode.UNSUPPORTED_VERSION
            else:
                found = plog.offset_for_timestamp(req.timestamp)
                if found is None or found[0] >= plog.visible_end_offset():
                    out.offset, out.timestamp = -1, -1  # no record at or after it: Kafka's "unknown"
                else:
                    out.offset, out.timestamp = found
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)
