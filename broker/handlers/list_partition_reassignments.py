"""ListPartitionReassignments: the partition moves under way, as the topic znodes record them.
Describe on the Cluster is needed (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

Response = ListPartitionReassignmentsResponse


async def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> Response:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Describe on the Cluster")
    snapshot = ctx.broker.snapshot()
    if request.topics is None:
        wanted = [(t.name, sorted(t.partitions)) for t in sorted(snapshot.topics.values(), key=lambda t: t.name)]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in request.topics]
    topics = []
    for name, indexes in wanted:
        ongoing = []
        for index in indexes:
            state = snapshot.partition(name, index)
            if state is None or not (state.adding or state.removing):
                continue  # Kafka leaves out what is not moving, and what does not exist
            ongoing.append(
                Response.OngoingPartitionReassignment(
                    partition_index=index,
                    replicas=list(state.replicas),
                    adding_replicas=list(state.adding),
                    removing_replicas=list(state.removing),
                )
            )
        if ongoing:
            topics.append(Response.OngoingTopicReassignment(name=name, partitions=ongoing))
    return Response(error_message=None, topics=topics)
