"""The API versions Tributary speaks: the broker's, as advertised in ApiVersions, and the client's.

The broker serves every version up to the newest of Apache Kafka's definitions (flexible versions
and tagged fields included) and keeps the old ones: librdkafka 2.0.2 (Debian's kcat) enables
message format v2, zstd and groups only when specific older versions fall inside the advertised
ranges (Produce 3, Fetch 4, OffsetCommit 1-2, JoinGroup 0, ...), and librdkafka up to 2.11
compresses with gzip, snappy and lz4 only when Produce v0 is in range, so Produce starts at 0
(magic 0 and 1 message sets are still refused). Every listed version must round-trip through
the codec, and every handler answers the fields its newest version adds (the tests check both).

Not yet at their newest: the transaction APIs, whose later versions carry KIP-890's server-side
defence (AddPartitionsToTxn v4+ verification from brokers, EndTxn v4+ epoch bumps), and
ConsumerGroupHeartbeat v1, which Kafka still marks unstable. InitProducerId v3 is KIP-360's
epoch bump, which librdkafka's transactional producer needs to recover from an abortable error.
"""

from __future__ import annotations

from tributary.protocol.messages import ApiKey
from tributary.protocol.schema import Versions

SUPPORTED_VERSIONS: dict[ApiKey, Versions] = {
    ApiKey.PRODUCE: Versions(0, 11),
    ApiKey.FETCH: Versions(4, 17),
    ApiKey.LIST_OFFSETS: Versions(1, 10),
    ApiKey.METADATA: Versions(0, 12),
    ApiKey.OFFSET_COMMIT: Versions(2, 9),
    ApiKey.OFFSET_FETCH: Versions(1, 9),
    ApiKey.FIND_COORDINATOR: Versions(0, 6),
    ApiKey.JOIN_GROUP: Versions(0, 9),
    ApiKey.HEARTBEAT: Versions(0, 4),
    ApiKey.LEAVE_GROUP: Versions(0, 5),
    ApiKey.SYNC_GROUP: Versions(0, 5),
    ApiKey.DESCRIBE_GROUPS: Versions(0, 5),
    ApiKey.LIST_GROUPS: Versions(0, 5),
    ApiKey.API_VERSIONS: Versions(0, 4),
    ApiKey.CREATE_TOPICS: Versions(2, 7),
    ApiKey.DELETE_TOPICS: Versions(1, 6),
    ApiKey.DELETE_RECORDS: Versions(0, 2),
    ApiKey.INIT_PRODUCER_ID: Versions(0, 5),
    ApiKey.DESCRIBE_CONFIGS: Versions(0, 4),
    ApiKey.ALTER_CONFIGS: Versions(0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: Versions(0, 4),
    ApiKey.CREATE_PARTITIONS: Versions(0, 3),
    ApiKey.DELETE_GROUPS: Versions(0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Versions(0, 1),
    ApiKey.OFFSET_DELETE: Versions(0, 0),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Versions(0, 4),
    ApiKey.ELECT_LEADERS: Versions(0, 2),
    # Transactions (KIP-98). librdkafka sends AddPartitionsToTxn and AddOffsetsToTxn v0,
    # EndTxn v0-1, TxnOffsetCommit v0-3; kafka-python up to v3 of each (flexible: not offered).
    ApiKey.ADD_PARTITIONS_TO_TXN: Versions(0, 2),
    ApiKey.ADD_OFFSETS_TO_TXN: Versions(0, 2),
    ApiKey.END_TXN: Versions(0, 2),
    ApiKey.TXN_OFFSET_COMMIT: Versions(0, 2),
    # Between brokers: a transaction coordinator has partition leaders append the markers.
    ApiKey.WRITE_TXN_MARKERS: Versions(0, 0),
    # The ACL APIs (docs/acls.md): librdkafka asks for v1, kafka-python for its newest; v3 only
    # adds the User resource type.
    ApiKey.DESCRIBE_ACLS: Versions(0, 3),
    ApiKey.CREATE_ACLS: Versions(0, 3),
    ApiKey.DELETE_ACLS: Versions(0, 3),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Versions(0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Versions(0, 0),
    ApiKey.DESCRIBE_CLUSTER: Versions(0, 1),
    ApiKey.DESCRIBE_PRODUCERS: Versions(0, 0),
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

#: What Tributary's own client sends (``client/wire/versions.py`` clips it to each broker's
#: range): the versions its code was written and tested for. It lags behind the broker's table on
#: purpose: a newer version means new semantics (topic ids in Fetch v13+, batched groups in
#: OffsetFetch v8+), which the client adopts API by API, never by raising a number here.
CLIENT_VERSIONS: dict[ApiKey, Versions] = {
    ApiKey.PRODUCE: Versions(3, 8),
    ApiKey.FETCH: Versions(4, 11),
    ApiKey.LIST_OFFSETS: Versions(1, 5),
    # v10+ name topics by id: the consumer group protocol (KIP-848) assigns partitions by id.
    ApiKey.METADATA: Versions(0, 12),
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
    ApiKey.DELETE_RECORDS: Versions(0, 2),
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
    ApiKey.ADD_PARTITIONS_TO_TXN: Versions(0, 2),
    ApiKey.ADD_OFFSETS_TO_TXN: Versions(0, 2),
    ApiKey.END_TXN: Versions(0, 2),
    ApiKey.TXN_OFFSET_COMMIT: Versions(0, 2),
    ApiKey.WRITE_TXN_MARKERS: Versions(0, 0),
    ApiKey.DESCRIBE_ACLS: Versions(0, 3),
    ApiKey.CREATE_ACLS: Versions(0, 3),
    ApiKey.DELETE_ACLS: Versions(0, 3),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Versions(0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Versions(0, 0),
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
    """Whether the broker serves ``version`` of ``api_key``."""
    # IntEnum members hash as their ints, so a plain int looks them up.
    versions = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return versions is not None and version in versions
