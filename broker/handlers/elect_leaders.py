"""ElectLeaders: move partitions back to their preferred replica (the first of the assignment).

The controller does it (it owns leadership): the request is handed to it through Kafka's
`/admin/preferred_replica_election` node, and each partition's answer is read from its state
afterwards: NONE (the preferred replica leads now), ELECTION_NOT_NEEDED (it led already),
PREFERRED_LEADER_NOT_AVAILABLE (it is down or out of sync: a preferred election is clean) or
UNKNOWN_TOPIC_OR_PARTITION. Unclean elections (election_type 1) are refused:
`unclean.leader.election.enable` is not supported. Alter on the Cluster is needed, else every
partition gets CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from tributary.broker.cluster.errors import ClusterError
from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ElectLeadersRequest, ElectLeadersResponse

PREFERRED = 0
Result = ElectLeadersResponse.PartitionResult


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    snapshot = ctx.broker.snapshot()
    if request.topic_partitions is None:
        wanted = [(t.name, p) for t in snapshot.topics.values() for p in sorted(t.partitions)]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    if not ctx.authorize_cluster(AclOperation.ALTER):
        refused = _answer(wanted, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Alter on the Cluster")
        return ElectLeadersResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, replica_election_results=refused)
    if request.election_type != PREFERRED:
        refused = _answer(wanted, ErrorCode.INVALID_REQUEST, "only preferred elections are supported")
        return ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST, replica_election_results=refused)
    known = [(t, p) for t, p in wanted if snapshot.partition(t, p) is not None]
    before = {key: snapshot.partition(*key) for key in known}
    try:
        after = await ctx.broker.registry.elect_preferred_leaders(known, max(request.timeout_ms, 1) / 1000)
    except ClusterError as exc:
        return ElectLeadersResponse(replica_election_results=_answer(wanted, ErrorCode.REQUEST_TIMED_OUT, str(exc)))
    results: dict[str, list[Result]] = {}
    for topic, index in wanted:
        state, previous = after.get((topic, index)), before.get((topic, index))
        if state is None or previous is None:
            code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        elif previous.replicas and previous.leader == previous.replicas[0]:
            code, message = ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica leads already"
        elif previous.replicas and state.leader == previous.replicas[0]:
            code, message = ErrorCode.NONE, None
        else:
            code, message = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not alive and in sync"
        results.setdefault(topic, []).append(Result(partition_id=index, error_code=code, error_message=message))
    return ElectLeadersResponse(
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=r) for t, r in results.items()
        ]
    )


def _answer(
    wanted: list[tuple[str, int]], code: ErrorCode, message: str
) -> list[ElectLeadersResponse.ReplicaElectionResult]:
    results: dict[str, list[Result]] = {}
    for topic, index in wanted:
        results.setdefault(topic, []).append(Result(partition_id=index, error_code=code, error_message=message))
    return [ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=r) for t, r in results.items()]
