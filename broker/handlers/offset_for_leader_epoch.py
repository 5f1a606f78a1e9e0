"""OffsetForLeaderEpoch: where a leader epoch ends in this leader's log (KIP-101, KIP-279).

Followers ask it before fetching, after a leader change, to find where their log and the new
leader's agree; consumers ask it (KIP-320) to notice that the log they were reading was cut
under them. The answer is the leader-epoch cache's: the largest epoch not above the one asked
for, and where the next one starts (or the log end for the latest epoch).
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.partitions import leader_epoch_error
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

Response = OffsetForLeaderEpochResponse


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    broker = ctx.broker
    snapshot = broker.snapshot()
    # Followers ask with ClusterAction on the Cluster; anyone else needs Describe on each topic.
    names = {t.topic for t in request.topics}
    if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION, log_denied=False):
        described = names
    else:
        described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = []
    for topic in request.topics:
        answers = []
        for asked in topic.partitions:
            out = Response.EpochEndOffset(partition=asked.partition)
            answers.append(out)
            if topic.topic not in described:
                out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            target = broker.partitions.lookup(snapshot, topic.topic, asked.partition)
            if isinstance(target, ErrorCode):
                out.error_code = target
                continue
            if (code := leader_epoch_error(asked.current_leader_epoch, target.leader_epoch)) is not None:
                out.error_code = code
                continue
            out.leader_epoch, out.end_offset = target.log.end_offset_for_epoch(asked.leader_epoch)
        topics.append(Response.OffsetForLeaderTopicResult(topic=topic.topic, partitions=answers))
    return OffsetForLeaderEpochResponse(topics=topics)
