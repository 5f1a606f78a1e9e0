"""WriteTxnMarkers (between brokers): a transaction coordinator has this broker, as the leader
of some of a transaction's partitions, append the commit or abort marker to each. Each answer
comes once the partition's in-sync replicas have the marker; NOT_LEADER_OR_FOLLOWER and the
other retriable errors send the coordinator to the partition's new leader. Only brokers send it:
ClusterAction on the Cluster is needed, else every partition gets CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.txn.markers import Marker
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse

R = WriteTxnMarkersResponse


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    allowed = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    answers = []
    for entry in request.markers:
        marker = Marker(entry.producer_id, entry.producer_epoch, entry.transaction_result, entry.coordinator_epoch)
        targets = [(t.name, p) for t in entry.topics for p in t.partition_indexes]
        if allowed:
            results = await ctx.broker.write_markers(marker, targets)
        else:
            results = dict.fromkeys(targets, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        answers.append(
            R.WritableTxnMarkerResult(
                producer_id=entry.producer_id,
                topics=[
                    R.WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=[
                            R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=results[t.name, p])
                            for p in t.partition_indexes
                        ],
                    )
                    for t in entry.topics
                ],
            )
        )
    return WriteTxnMarkersResponse(markers=answers)
