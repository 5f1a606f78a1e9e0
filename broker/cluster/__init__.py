"""The broker's view of the cluster, kept in ZooKeeper through kazoo (Kafka's ZooKeeper-mode layout).

Start `ClusterRegistry.run` in the broker's nursery; read `registry.snapshot` to answer Metadata;
consume `registry.assignment_changes()` to create and delete local logs.
"""

from tributary.broker.cluster.errors import (
    BrokerIdInUseError,
    ClusterError,
    ControllerUnavailableError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    RegistryNotRunningError,
    TopicCreationRejectedError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperUnavailableError,
)
from tributary.broker.cluster.model import (
    NO_LEADER,
    AssignmentChange,
    BrokerInfo,
    ClusterSnapshot,
    PartitionState,
    ReplicaKey,
    TopicInfo,
)
from tributary.broker.cluster.registry import AssignmentFeed, ClusterRegistry, SnapshotFeed

__all__ = [
    "NO_LEADER",
    "AssignmentChange",
    "AssignmentFeed",
    "BrokerIdInUseError",
    "BrokerInfo",
    "ClusterError",
    "ClusterRegistry",
    "ClusterSnapshot",
    "ControllerUnavailableError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "PartitionState",
    "RegistryNotRunningError",
    "ReplicaKey",
    "SnapshotFeed",
    "TopicCreationRejectedError",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicError",
    "ZooKeeperUnavailableError",
]
