"""OffsetFetch: a group's committed offsets (-1 where nothing is committed)."""

from __future__ import annotations

from collections import defaultdict

from tributary.broker.context import RequestContext
from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import OffsetFetchRequest, OffsetFetchResponse

#: From this version the response has a top-level error, and a null topic list asks for everything.
TOP_LEVEL_ERROR_VERSION = 2


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


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
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
