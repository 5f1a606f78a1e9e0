"""The API versions Tributary speaks, as advertised in ApiVersions.

Only non-flexible versions are listed, apart from ApiVersions v3, SaslAuthenticate v2,
InitProducerId v2-4 (v3 is KIP-360's epoch bump, which librdkafka's transactional producer
needs to recover from an abortable error; v2 is where that API turns flexible) and the APIs
that have no other (AlterPartitionReassignments, ListPartitionReassignments,
DescribeTransactions, ListTransactions, Describe/AlterUserScramCredentials, the KIP-848
ConsumerGroup APIs): librdkafka
2.0.2 (Debian's kcat) enables message format v2, zstd and groups only when
specific older versions fall inside the advertised ranges, and every listed
version must round-trip through the codec (the tests check it).
"""

from __future__ import annotations

from tributary.protocol.messages import ApiKey
from tributary.protocol.schema import Versions

SUPPORTED_VERSIONS: dict[ApiKey, Versions] = {
    ApiKey.PRODUCE: Versions(3, 8),
    ApiKey.FETCH: Versions(4, 11),
    ApiKey.LIST_OFFSETS: Versions(1, 5),
    ApiKey.METADATA: Versions(0, 8),
    ApiKey.OFFSET_COMMIT: Versions(2, 7),
    ApiKey.OFFSET_FETCH: Versions(1, 5),
    ApiKey.FIND_COORDINATOR: Versions(0, 2),
    ApiKey.JOIN_GROUP: Versions(0, 5),
    ApiKey.HEARTBEAT: Versions(0, 3),
    ApiKey.LEAVE_GROUP: Versions(0, 3),
    ApiKey.SYNC_GROUP: Versions(0, 3),
    ApiKey.DESCRIBE_GROUPS: Versions(0, 4),
    ApiKey.LIST_GROUPS: Versions(0, 5),
    ApiKey.API_VERSIONS: Versions(0, 3),
    ApiKey.CREATE_TOPICS: Versions(2, 4),
    ApiKey.DELETE_TOPICS: Versions(1, 3),
    ApiKey.INIT_PRODUCER_ID: Versions(0, 4),
    ApiKey.DESCRIBE_CONFIGS: Versions(0, 3),
    ApiKey.ALTER_CONFIGS: Versions(0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: Versions(0, 1),
    ApiKey.CREATE_PARTITIONS: Versions(0, 1),
    ApiKey.DELETE_GROUPS: Versions(0, 1),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Versions(0, 0),
    ApiKey.OFFSET_DELETE: Versions(0, 0),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Versions(0, 3),
    ApiKey.ELECT_LEADERS: Versions(0, 1),
    # Transactions (KIP-98). librdkafka sends AddPartitionsToTxn and AddOffsetsToTxn v0,
    # EndTxn v0-1, TxnOffsetCommit v0-3; kafka-python up to v3 of each (flexible: not offered).
    ApiKey.ADD_PARTITIONS_TO_TXN: Versions(0, 2),
    ApiKey.ADD_OFFSETS_TO_TXN: Versions(0, 2),
    ApiKey.END_TXN: Versions(0, 2),
    ApiKey.TXN_OFFSET_COMMIT: Versions(0, 2),
    # Between brokers: a transaction coordinator has partition leaders append the markers.
    ApiKey.WRITE_TXN_MARKERS: Versions(0, 0),
    # The ACL APIs with their flexible versions: librdkafka asks for v1, kafka-python for its
    # newest; v3 only adds the User resource type.
    ApiKey.DESCRIBE_ACLS: Versions(0, 3),
    ApiKey.CREATE_ACLS: Versions(0, 3),
    ApiKey.DELETE_ACLS: Versions(0, 3),
    # Flexible from their first version; no client picks a version of these by the range.
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Versions(0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Versions(0, 0),
    # KIP-848; librdkafka asks for ConsumerGroupHeartbeat v1 exactly (its regex and
    # client-chosen member id).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Versions(0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Versions(0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: Versions(0, 0),
    ApiKey.LIST_TRANSACTIONS: Versions(0, 1),
    # SASL: v0 handshakes are followed by raw tokens, v1 by SaslAuthenticate; SaslAuthenticate
    # v2 is flexible and is what Kafka's Java client picks (librdkafka 2.0 stops at v1).
    ApiKey.SASL_HANDSHAKE: Versions(0, 1),
    ApiKey.SASL_AUTHENTICATE: Versions(0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Versions(0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Versions(0, 0),
}

#: The consumer-protocol Subscription and Assignment versions we write; newer
#: ones decode by reading the fields we know.
CONSUMER_PROTOCOL_VERSIONS = Versions(0, 3)


def is_supported(api_key: int, version: int) -> bool:
    # IntEnum members hash as their ints, so a plain int looks them up.
    versions = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return versions is not None and version in versions
