"""Routes each request to the handler of its API: the one table of what the broker serves.

The table sits above the handlers and the shared state below them, so ``Broker``
imports no handler (an import-linter contract keeps it so). Each route is typed
with its API's request and response, so mypy checks that a handler takes its own
API's request and answers with its own API's response. The table is also what
the broker advertises in ApiVersions: an API is advertised once it has a route.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sized
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tributary.broker.context import CloseConnection, RequestContext
from tributary.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from tributary.protocol import messages as m
from tributary.protocol.errors import ProtocolError
from tributary.protocol.headers import decode_request_body, encode_response_parts
from tributary.protocol.messages import ApiKey
from tributary.protocol.supported import SUPPORTED_VERSIONS, is_supported

Req = TypeVar("Req")
Resp = TypeVar("Resp")


# Neither frozen nor slotted: ``Route[Req, Resp](...)`` records its type arguments on
# the instance (``__orig_class__``), which lets a test check each route against its API key.
@dataclass
class Route(Generic[Req, Resp]):
    """One API's handler: its decoded request in, its response out."""

    handle: Callable[[RequestContext, Req], Awaitable[Resp]]


ROUTES: Mapping[ApiKey, Route[Any, Any]] = {
    ApiKey.API_VERSIONS: Route[m.ApiVersionsRequest, m.ApiVersionsResponse](api_versions.handle),
    ApiKey.METADATA: Route[m.MetadataRequest, m.MetadataResponse](metadata.handle),
    # acks=0: Kafka sends no response, and neither does the handler.
    ApiKey.PRODUCE: Route[m.ProduceRequest, m.ProduceResponse | None](produce.handle),
    ApiKey.FETCH: Route[m.FetchRequest, m.FetchResponse](fetch.handle),
    ApiKey.LIST_OFFSETS: Route[m.ListOffsetsRequest, m.ListOffsetsResponse](list_offsets.handle),
    ApiKey.CREATE_TOPICS: Route[m.CreateTopicsRequest, m.CreateTopicsResponse](create_topics.handle),
    ApiKey.DELETE_TOPICS: Route[m.DeleteTopicsRequest, m.DeleteTopicsResponse](delete_topics.handle),
    ApiKey.INIT_PRODUCER_ID: Route[m.InitProducerIdRequest, m.InitProducerIdResponse](init_producer_id.handle),
    ApiKey.OFFSET_COMMIT: Route[m.OffsetCommitRequest, m.OffsetCommitResponse](offset_commit.handle),
    ApiKey.OFFSET_FETCH: Route[m.OffsetFetchRequest, m.OffsetFetchResponse](offset_fetch.handle),
    ApiKey.FIND_COORDINATOR: Route[m.FindCoordinatorRequest, m.FindCoordinatorResponse](find_coordinator.handle),
    ApiKey.JOIN_GROUP: Route[m.JoinGroupRequest, m.JoinGroupResponse](join_group.handle),
    ApiKey.HEARTBEAT: Route[m.HeartbeatRequest, m.HeartbeatResponse](heartbeat.handle),
    ApiKey.LEAVE_GROUP: Route[m.LeaveGroupRequest, m.LeaveGroupResponse](leave_group.handle),
    ApiKey.SYNC_GROUP: Route[m.SyncGroupRequest, m.SyncGroupResponse](sync_group.handle),
    ApiKey.DESCRIBE_GROUPS: Route[m.DescribeGroupsRequest, m.DescribeGroupsResponse](describe_groups.handle),
    ApiKey.LIST_GROUPS: Route[m.ListGroupsRequest, m.ListGroupsResponse](list_groups.handle),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Route[m.ConsumerGroupHeartbeatRequest, m.ConsumerGroupHeartbeatResponse](
        consumer_group_heartbeat.handle
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Route[m.ConsumerGroupDescribeRequest, m.ConsumerGroupDescribeResponse](
        consumer_group_describe.handle
    ),
    ApiKey.CREATE_PARTITIONS: Route[m.CreatePartitionsRequest, m.CreatePartitionsResponse](create_partitions.handle),
    ApiKey.DESCRIBE_CONFIGS: Route[m.DescribeConfigsRequest, m.DescribeConfigsResponse](describe_configs.handle),
    ApiKey.ALTER_CONFIGS: Route[m.AlterConfigsRequest, m.AlterConfigsResponse](alter_configs.handle),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Route[m.IncrementalAlterConfigsRequest, m.IncrementalAlterConfigsResponse](
        incremental_alter_configs.handle
    ),
    ApiKey.DELETE_GROUPS: Route[m.DeleteGroupsRequest, m.DeleteGroupsResponse](delete_groups.handle),
    ApiKey.OFFSET_DELETE: Route[m.OffsetDeleteRequest, m.OffsetDeleteResponse](offset_delete.handle),
    ApiKey.DESCRIBE_LOG_DIRS: Route[m.DescribeLogDirsRequest, m.DescribeLogDirsResponse](describe_log_dirs.handle),
    ApiKey.ELECT_LEADERS: Route[m.ElectLeadersRequest, m.ElectLeadersResponse](elect_leaders.handle),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Route[
        m.AlterPartitionReassignmentsRequest, m.AlterPartitionReassignmentsResponse
    ](alter_partition_reassignments.handle),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Route[
        m.ListPartitionReassignmentsRequest, m.ListPartitionReassignmentsResponse
    ](list_partition_reassignments.handle),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Route[m.OffsetForLeaderEpochRequest, m.OffsetForLeaderEpochResponse](
        offset_for_leader_epoch.handle
    ),
    ApiKey.DELETE_RECORDS: Route[m.DeleteRecordsRequest, m.DeleteRecordsResponse](delete_records.handle),
    ApiKey.DESCRIBE_CLUSTER: Route[m.DescribeClusterRequest, m.DescribeClusterResponse](describe_cluster.handle),
    ApiKey.DESCRIBE_PRODUCERS: Route[m.DescribeProducersRequest, m.DescribeProducersResponse](
        describe_producers.handle
    ),
    ApiKey.ADD_PARTITIONS_TO_TXN: Route[m.AddPartitionsToTxnRequest, m.AddPartitionsToTxnResponse](
        add_partitions_to_txn.handle
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: Route[m.AddOffsetsToTxnRequest, m.AddOffsetsToTxnResponse](add_offsets_to_txn.handle),
    ApiKey.END_TXN: Route[m.EndTxnRequest, m.EndTxnResponse](end_txn.handle),
    ApiKey.WRITE_TXN_MARKERS: Route[m.WriteTxnMarkersRequest, m.WriteTxnMarkersResponse](write_txn_markers.handle),
    ApiKey.TXN_OFFSET_COMMIT: Route[m.TxnOffsetCommitRequest, m.TxnOffsetCommitResponse](txn_offset_commit.handle),
    ApiKey.DESCRIBE_TRANSACTIONS: Route[m.DescribeTransactionsRequest, m.DescribeTransactionsResponse](
        describe_transactions.handle
    ),
    ApiKey.LIST_TRANSACTIONS: Route[m.ListTransactionsRequest, m.ListTransactionsResponse](list_transactions.handle),
    ApiKey.SASL_HANDSHAKE: Route[m.SaslHandshakeRequest, m.SaslHandshakeResponse](sasl_handshake.handle),
    ApiKey.SASL_AUTHENTICATE: Route[m.SaslAuthenticateRequest, m.SaslAuthenticateResponse](sasl_authenticate.handle),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Route[
        m.DescribeUserScramCredentialsRequest, m.DescribeUserScramCredentialsResponse
    ](describe_user_scram_credentials.handle),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Route[m.AlterUserScramCredentialsRequest, m.AlterUserScramCredentialsResponse](
        alter_user_scram_credentials.handle
    ),
    ApiKey.DESCRIBE_ACLS: Route[m.DescribeAclsRequest, m.DescribeAclsResponse](describe_acls.handle),
    ApiKey.CREATE_ACLS: Route[m.CreateAclsRequest, m.CreateAclsResponse](create_acls.handle),
    ApiKey.DELETE_ACLS: Route[m.DeleteAclsRequest, m.DeleteAclsResponse](delete_acls.handle),
}


def advertised_versions(routes: Mapping[ApiKey, object] = ROUTES) -> list[m.ApiVersionsResponse.ApiVersion]:
    """The supported ranges of the APIs that have a route: what ApiVersions answers."""
    return [
        m.ApiVersionsResponse.ApiVersion(api_key=key, min_version=versions.lo, max_version=versions.hi or versions.lo)
        for key, versions in sorted(SUPPORTED_VERSIONS.items())
        if key in routes
    ]


async def respond(ctx: RequestContext, frame: bytes) -> list[bytes | Sized] | None:
    """Decodes the request in ``frame``, runs its handler and encodes the answer.

    None means nothing is sent back (acks=0 produce). A malformed request, an unknown
    API or an unsupported version raises :class:`CloseConnection`; ApiVersions at a
    version the broker does not know gets Kafka's v0 error body instead, so the
    client can retry lower."""
    envelope = ctx.envelope
    # An API in the codec's supported table but without a route yet is not
    # advertised either: the client gets what any unknown API gets.
    if not is_supported(envelope.api_key, envelope.api_version) or envelope.api_key not in ROUTES:
        if envelope.api_key == ApiKey.API_VERSIONS:
            body = api_versions.unsupported_api_versions_response(ctx)
            return encode_response_parts(body, 0, envelope.correlation_id)
        raise CloseConnection(
            f"unsupported request: API key {envelope.api_key} version {envelope.api_version} "
            f"from client {envelope.header.client_id!r}"
        )
    try:
        request = decode_request_body(envelope, frame)
    except ProtocolError as exc:
        raise CloseConnection(f"malformed {ApiKey(envelope.api_key).name} v{envelope.api_version}: {exc}") from None
    response = await ROUTES[ApiKey(envelope.api_key)].handle(ctx, request)
    if response is None:  # acks=0 produce: Kafka sends nothing back
        return None
    return encode_response_parts(response, envelope.api_version, envelope.correlation_id)


def decode_produce(ctx: RequestContext, frame: bytes) -> m.ProduceRequest | None:
    """The Produce request in ``frame``, for :func:`respond_produce`; None when the frame holds
    another API, or Produce at a version not served (:func:`respond` answers those). A
    malformed one raises :class:`CloseConnection`, as in :func:`respond`."""
    envelope = ctx.envelope
    if envelope.api_key != ApiKey.PRODUCE or not is_supported(envelope.api_key, envelope.api_version):
        return None
    try:
        request: m.ProduceRequest = decode_request_body(envelope, frame)
    except ProtocolError as exc:
        raise CloseConnection(f"malformed PRODUCE v{envelope.api_version}: {exc}") from None
    return request


async def respond_produce(
    requests: list[tuple[RequestContext, m.ProduceRequest]],
) -> list[list[bytes | Sized] | None]:
    """:func:`respond` to Produce requests that came one after another on a connection, answered
    together (broker/handlers/produce.py, ``handle_many``): their encoded responses, in order,
    None where nothing is sent back (acks=0)."""
    answers = await produce.handle_many(requests)
    return [
        None if answer is None else encode_response_parts(answer, ctx.api_version, ctx.envelope.correlation_id)
        for (ctx, _), answer in zip(requests, answers, strict=True)
    ]
