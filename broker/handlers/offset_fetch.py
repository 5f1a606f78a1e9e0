"""OffsetFetch: a group's committed offsets (-1 where nothing is committed).

Describe on the group is needed (GROUP_AUTHORIZATION_FAILED); of the topics, a partition asked
for by name needs Describe on its topic (TOPIC_AUTHORIZATION_FAILED), and a request for all of
the group's offsets shows only the topics the principal may Describe (Kafka's checks).
"""

from __future__ import annotations

from collections import defaultdict

from tributary.broker.context import RequestContext
from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.protocol.acl import AclOperation, ResourceType
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


def _refused(ctx: RequestContext, request: OffsetFetchRequest, error: ErrorCode) -> OffsetFetchResponse:
    """The whole request refused: a top-level error, or (v1, which has none) on every partition."""
    if ctx.api_version >= TOP_LEVEL_ERROR_VERSION:
        return OffsetFetchResponse(error_code=error)
    return OffsetFetchResponse(
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=-1, metadata="", error_code=error
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in request.topics or []
        ]
    )


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return _refused(ctx, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    result = ctx.broker.groups.fetch_offsets(request.group_id, wanted)
    if result.error != ErrorCode.NONE:
        return _refused(ctx, request, ErrorCode(result.error))
    # Named topics: refused one by one; all of them: only those the principal may describe.
    named = request.topics is not None
    described = ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TOPIC, {topic for topic, _ in result.offsets}, log_denied=named
    )
    by_topic: dict[str, list[OffsetFetchResponse.OffsetFetchResponsePartition]] = defaultdict(list)
    for (topic, index), value in result.offsets.items():
        if topic in described:
            by_topic[topic].append(_partition(index, value))
        elif named:
            refused = OffsetFetchResponse.OffsetFetchResponsePartition(partition_index=index, committed_offset=-1)
            refused.metadata, refused.error_code = "", ErrorCode.TOPIC_AUTHORIZATION_FAILED
            by_topic[topic].append(refused)
    return OffsetFetchResponse(
        error_code=ErrorCode.NONE,
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=topic, partitions=partitions)
            for topic, partitions in by_topic.items()
        ],
    )
