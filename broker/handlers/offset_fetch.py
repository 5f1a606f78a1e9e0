"""OffsetFetch: a group's committed offsets (-1 where nothing is committed).

From v8 one request asks for several groups at once, each answered on its own (a group this
broker does not coordinate gets NOT_COORDINATOR and the others their offsets). v9's member id and
epoch belong to the consumer group protocol (KIP-848); a classic group's offsets are not guarded
by them, as in Kafka.
"""

from __future__ import annotations

from collections import defaultdict

from tributary.broker.context import RequestContext
from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import OffsetFetchRequest, OffsetFetchResponse

#: From this version the response has a top-level error, and a null topic list asks for everything.
TOP_LEVEL_ERROR_VERSION = 2
#: From this version a request names several groups.
BATCHED_GROUPS_VERSION = 8


def _partition(index: int, value: OffsetAndMetadata | None) -> OffsetFetchResponse.OffsetFetchResponsePartition:
    if value is None:
        return OffsetFetchResponse.OffsetFetchResponsePartition(
            partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=0
        )
    return OffsetFetchResponse.OffsetFetchResponsePartition(
        partition_index=index,
        committed_offset=value.offset,
        committed_leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        error_code=ErrorCode.NONE,
    )


def _group(
    ctx: RequestContext, asked: OffsetFetchRequest.OffsetFetchRequestGroup
) -> OffsetFetchResponse.OffsetFetchResponseGroup:
    wanted = None if asked.topics is None else [(t.name, p) for t in asked.topics for p in t.partition_indexes]
    result = ctx.broker.groups.fetch_offsets(asked.group_id, wanted)
    answer = OffsetFetchResponse.OffsetFetchResponseGroup(group_id=asked.group_id, error_code=result.error)
    if result.error != ErrorCode.NONE:
        return answer
    by_topic: dict[str, list[OffsetFetchResponse.OffsetFetchResponsePartitions]] = defaultdict(list)
    for (topic, index), value in result.offsets.items():
        p = _partition(index, value)
        by_topic[topic].append(
            OffsetFetchResponse.OffsetFetchResponsePartitions(
                partition_index=p.partition_index, committed_offset=p.committed_offset,
                committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata, error_code=p.error_code,
            )
        )  # fmt: skip
    answer.topics = [
        OffsetFetchResponse.OffsetFetchResponseTopics(name=topic, partitions=partitions)
        for topic, partitions in by_topic.items()
    ]
    return answer


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.api_version >= BATCHED_GROUPS_VERSION:
        return OffsetFetchResponse(groups=[_group(ctx, g) for g in request.groups])
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    result = ctx.broker.groups.fetch_offsets(request.group_id, wanted)
    if result.error != ErrorCode.NONE:
        if ctx.api_version >= TOP_LEVEL_ERROR_VERSION:
            return OffsetFetchResponse(error_code=result.error)
        # v1 has no top-level error: every requested partition carries it.
        return OffsetFetchResponse(
            topics=[
                OffsetFetchResponse.OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartition(
                            partition_index=p, committed_offset=-1, metadata="", error_code=result.error
                        )
                        for p in t.partition_indexes
                    ],
                )
                for t in request.topics or []
            ]
        )
    by_topic: dict[str, list[OffsetFetchResponse.OffsetFetchResponsePartition]] = defaultdict(list)
    for (topic, index), value in result.offsets.items():
        by_topic[topic].append(_partition(index, value))
    return OffsetFetchResponse(
        error_code=ErrorCode.NONE,
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=topic, partitions=partitions)
            for topic, partitions in by_topic.items()
        ],
    )
