"""ListOffsets: earliest, latest, or the first offset at or after a timestamp.

"Latest" is the high watermark, or with isolation_level 1 (read_committed, v2+) the last
stable offset; a timestamp finds only records below that same bound.

A leader elected a moment ago may not know its high watermark yet: its log can hold batches,
appended under the previous leader, that every in-sync replica has and that are therefore
committed, while its high watermark still lags behind them until the followers fetch. A consumer
asking for the end then would be told an offset that is about to move past data already there,
and a writer reconciling against the end (the mirror) would write that data again. So, as Kafka
does, a consumer's ListOffsets gets OFFSET_NOT_AVAILABLE (retriable) until the high watermark has
reached the log end the leader had when its epoch began (LEADER_NOT_AVAILABLE before v5, which
predates that error). EARLIEST and EARLIEST_LOCAL are answered meanwhile, as in Kafka.

Besides a timestamp, Kafka's special values: LATEST (-1, the high watermark), EARLIEST (-2, the
log start offset, which DeleteRecords moves), MAX_TIMESTAMP (-3, KIP-734, v7: the record with
the largest timestamp), EARLIEST_LOCAL (-4, KIP-405, v8: the earliest offset on this broker's
disk, which without tiered storage is the log start offset) and LATEST_TIERED (-5, KIP-1005, v9:
the last offset in tiered storage, of which there is none here: -1, as Kafka answers when
remote storage is off). v10's timeout is for reads from remote storage and has nothing to bound.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.reads import Isolation
from tributary.broker.partitions import leader_epoch_error
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ListOffsetsRequest, ListOffsetsResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
#: The replica id of a consumer (anything else is a broker or a debugging tool).
CONSUMER_REPLICA_ID = -1
#: The log start does not depend on the high watermark: Kafka answers these at once.
_KNOWN_WITHOUT_HIGH_WATERMARK = (EARLIEST, EARLIEST_LOCAL)
#: The first ListOffsets version that knows OFFSET_NOT_AVAILABLE (KIP-207).
OFFSET_NOT_AVAILABLE_VERSION = 5


def _answer(
    out: ListOffsetsResponse.ListOffsetsPartitionResponse, plog: PartitionLog, timestamp: int, isolation: Isolation
) -> None:
    """The offset (and timestamp) the log answers for ``timestamp`` or a special value, as a reader
    at ``isolation`` may see it."""
    if timestamp == LATEST:
        out.offset = plog.visible_end_offset(isolation)
    elif timestamp in (EARLIEST, EARLIEST_LOCAL):
        out.offset = plog.log_start_offset
    elif timestamp == LATEST_TIERED:
        out.offset, out.timestamp, out.leader_epoch = -1, -1, -1
    elif timestamp < 0 and timestamp != MAX_TIMESTAMP:
        out.error_code = ErrorCode.UNSUPPORTED_VERSION
    else:
        found = (
            plog.offset_of_max_timestamp(isolation)
            if timestamp == MAX_TIMESTAMP
            else plog.offset_for_timestamp(timestamp, isolation)
        )
        if found is None or found[0] >= plog.visible_end_offset(isolation):
            out.offset, out.timestamp = -1, -1  # no record at or after it: Kafka's "unknown"
        else:
            out.offset, out.timestamp = found


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    snapshot = broker.snapshot()
    # v2+: a read_committed consumer's "latest" is the last stable offset (Kafka's rule).
    isolation = Isolation.READ_COMMITTED if request.isolation_level == 1 else Isolation.READ_UNCOMMITTED
    described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for req in topic.partitions:
            out = ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=req.partition_index)
            partitions.append(out)
            if topic.name not in described:
                out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            target = broker.partitions.lookup(snapshot, topic.name, req.partition_index)
            if isinstance(target, ErrorCode):
                out.error_code = target
                continue
            if (code := leader_epoch_error(req.current_leader_epoch, target.leader_epoch)) is not None:
                out.error_code = code
                continue
            plog = target.log
            state = target.leader_state
            if (
                request.replica_id == CONSUMER_REPLICA_ID
                and state is not None
                and plog.high_watermark < state.epoch_start_offset
                and req.timestamp not in _KNOWN_WITHOUT_HIGH_WATERMARK
            ):
                out.error_code = (
                    ErrorCode.OFFSET_NOT_AVAILABLE
                    if ctx.api_version >= OFFSET_NOT_AVAILABLE_VERSION
                    else ErrorCode.LEADER_NOT_AVAILABLE
                )
                continue
            out.leader_epoch = target.leader_epoch
            _answer(out, plog, req.timestamp, isolation)
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)
