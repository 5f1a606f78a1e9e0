"""DescribeCluster (KIP-700): the cluster id, the controller and the live brokers.

What Metadata says about the cluster, without topics: admin clients (describe_cluster, and
Kafka's tools) ask it instead. Endpoint type 2 (the KRaft controllers, v1) has no answer in a
ZooKeeper cluster: UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker gives. Anyone may ask (Kafka's
rule); the Cluster's authorized operations, when asked for, need Describe on it (else 0).
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeClusterRequest, DescribeClusterResponse

BROKERS_ENDPOINT = 1


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    if request.endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"endpoint type {request.endpoint_type}: this cluster describes its brokers only",
            endpoint_type=request.endpoint_type,
        )
    snapshot = ctx.broker.snapshot()
    operations = -(2**31)  # Kafka's "not asked for"
    if request.include_cluster_authorized_operations:
        operations = (
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.authorize_cluster(AclOperation.DESCRIBE)
            else 0
        )
    return DescribeClusterResponse(
        cluster_authorized_operations=operations,
        error_code=ErrorCode.NONE,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=snapshot.cluster_id,
        controller_id=snapshot.controller_id if snapshot.controller_id is not None else -1,
        # Each broker at its address on the listener this client came in on, as in Metadata.
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(broker_id=b.id, host=address[0], port=address[1], rack=b.rack)
            for b in sorted(snapshot.brokers.values(), key=lambda b: b.id)
            if (address := b.address(ctx.listener)) is not None
        ],
    )
