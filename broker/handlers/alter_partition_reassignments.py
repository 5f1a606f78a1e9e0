"""AlterPartitionReassignments: move partitions to other brokers, or cancel a move (KIP-455).

Each partition's target is checked here (a known partition, a non-empty list of distinct live
brokers: INVALID_REPLICA_ASSIGNMENT naming what is wrong; a cancellation of a partition not
moving: NO_REASSIGNMENT_IN_PROGRESS). The accepted ones go to the controller together through
Kafka's `/admin/reassign_partitions` node, and the answer waits until it has started them: from
then on ListPartitionReassignments shows them, until every target replica is in sync and the
controller completes the move (:mod:`broker.cluster.reassignment`). Alter on the Cluster is
needed (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from tributary.broker.cluster import reassignment
from tributary.broker.cluster.errors import ClusterError
from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

Response = AlterPartitionReassignmentsResponse
Result = Response.ReassignablePartitionResponse


async def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> Response:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Alter on the Cluster")
    snapshot = ctx.broker.snapshot()
    live = snapshot.live_broker_ids
    accepted: dict[tuple[str, int], tuple[int, ...] | None] = {}
    results: dict[str, list[Result]] = {}
    for topic in request.topics:
        for wanted in topic.partitions:
            result = Result(partition_index=wanted.partition_index, error_code=ErrorCode.NONE, error_message=None)
            results.setdefault(topic.name, []).append(result)
            state = snapshot.partition(topic.name, wanted.partition_index)
            target = None if wanted.replicas is None else tuple(wanted.replicas)
            if state is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif target is None and not (state.adding or state.removing):
                result.error_code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                result.error_message = f"{topic.name}-{wanted.partition_index} is not being reassigned"
            elif target is not None and (why := reassignment.invalid_target(target, live)) is not None:
                result.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                result.error_message = why
            else:
                accepted[topic.name, wanted.partition_index] = target
    if accepted:
        try:
            await ctx.broker.registry.reassign_partitions(accepted, max(request.timeout_ms, 1) / 1000)
        except ClusterError as exc:
            for topic_name, partitions in results.items():
                for result in partitions:
                    if (topic_name, result.partition_index) in accepted:
                        result.error_code, result.error_message = ErrorCode.REQUEST_TIMED_OUT, str(exc)
    return Response(
        error_message=None,
        responses=[Response.ReassignableTopicResponse(name=name, partitions=found) for name, found in results.items()],
    )
