"""OffsetFetch: a group's committed offsets (-1 where nothing is committed).

Describe on the group is needed (GROUP_AUTHORIZATION_FAILED); of the topics, a partition asked
for by name needs Describe on its topic (TOPIC_AUTHORIZATION_FAILED), and a request for all of
the group's offsets shows only the topics the principal may Describe (Kafka's checks).

From v8 one request asks for several groups at once, each answered (and authorized) on its own:
a group this broker does not coordinate gets NOT_COORDINATOR and the others their offsets. v9's
member id and epoch belong to the consumer group protocol (KIP-848); a classic group's offsets
are not guarded by them, as in Kafka.
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
#: From this version a request names several groups.
BATCHED_GROUPS_VERSION = 8

Partition = OffsetFetchResponse.OffsetFetchResponsePartition


def _partition(index: int, value: OffsetAndMetadata | None) -> Partition:
    if value is None:
        return Partition(
            partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=0
        )
    return Partition(
        partition_index=index,
        committed_offset=value.offset,
        committed_leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        error_code=ErrorCode.NONE,
    )


def _offsets(
    ctx: RequestContext, group_id: str, wanted: list[tuple[str, int]] | None
) -> tuple[ErrorCode, dict[str, list[Partition]]]:
    """One group's answer: its error, or its committed offsets by topic as the principal may see
    them (``wanted`` None: all of them)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    result = ctx.broker.groups.fetch_offsets(group_id, wanted)
    if result.error != ErrorCode.NONE:
        return ErrorCode(result.error), {}
    # Named topics: refused one by one; all of them: only those the principal may describe.
    named = wanted is not None
    described = ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TOPIC, {topic for topic, _ in result.offsets}, log_denied=named
    )
    by_topic: dict[str, list[Partition]] = defaultdict(list)
    for (topic, index), value in result.offsets.items():
        if topic in described:
            by_topic[topic].append(_partition(index, value))
        elif named:
            refused = Partition(partition_index=index, committed_offset=-1)
            refused.metadata, refused.error_code = "", ErrorCode.TOPIC_AUTHORIZATION_FAILED
            by_topic[topic].append(refused)
    return ErrorCode.NONE, by_topic


def _refused(ctx: RequestContext, request: OffsetFetchRequest, error: ErrorCode) -> OffsetFetchResponse:
    """The whole request refused: a top-level error, or (v1, which has none) on every partition."""
    if ctx.api_version >= TOP_LEVEL_ERROR_VERSION:
        return OffsetFetchResponse(error_code=error)
    return OffsetFetchResponse(
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    Partition(partition_index=p, committed_offset=-1, metadata="", error_code=error)
                    for p in t.partition_indexes
                ],
            )
            for t in request.topics or []
        ]
    )


def _group(
    ctx: RequestContext, asked: OffsetFetchRequest.OffsetFetchRequestGroup
) -> OffsetFetchResponse.OffsetFetchResponseGroup:
    wanted = None if asked.topics is None else [(t.name, p) for t in asked.topics for p in t.partition_indexes]
    error, by_topic = _offsets(ctx, asked.group_id, wanted)
    return OffsetFetchResponse.OffsetFetchResponseGroup(
        group_id=asked.group_id,
        error_code=error,
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopics(
                name=topic,
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartitions(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch,
                        metadata=p.metadata,
                        error_code=p.error_code,
                    )
                    for p in partitions
                ],
            )
            for topic, partitions in by_topic.items()
        ],
    )


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.api_version >= BATCHED_GROUPS_VERSION:
        return OffsetFetchResponse(groups=[_group(ctx, g) for g in request.groups])
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    error, by_topic = _offsets(ctx, request.group_id, wanted)
    if error != ErrorCode.NONE:
        return _refused(ctx, request, error)
    return OffsetFetchResponse(
        error_code=ErrorCode.NONE,
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=topic, partitions=partitions)
            for topic, partitions in by_topic.items()
        ],
    )
