"""Where everything lives in ZooKeeper: Kafka's ZooKeeper-mode layout, so its tools can read it."""

from __future__ import annotations

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
ADMIN = "/admin"
ADMIN_CREATE_TOPICS = "/admin/create_topics"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
# Tributary's own: requests to grow a topic, acted on by the controller.
ADMIN_CREATE_PARTITIONS = "/admin/create_partitions"
# Tributary's own: an ephemeral node per broker shutting down, whose leadership the controller
# moves to other in-sync replicas first (Kafka's ControlledShutdown request, through ZooKeeper).
ADMIN_CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
# Kafka's: {"version":1,"partitions":[{"topic":..,"partition":..}]}, acted on and deleted by the
# controller (kafka-preferred-replica-election / ElectLeaders).
ADMIN_PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
# Kafka's: {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}, started and
# deleted by the controller (kafka-reassign-partitions / AlterPartitionReassignments). Tributary
# adds "replicas": null, which cancels the partition's reassignment.
ADMIN_REASSIGN_PARTITIONS = "/admin/reassign_partitions"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Created at start-up by every broker (idempotently) so watches have something to sit on.
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_TOPICS,
    ADMIN_CREATE_TOPICS,
    ADMIN_DELETE_TOPICS,
    ADMIN_CREATE_PARTITIONS,
    ADMIN_CONTROLLED_SHUTDOWN,
    CLUSTER,
)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def partition(name: str, index: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{index}"


def partition_state(name: str, index: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{index}/state"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def create_request(name: str) -> str:
    return f"{ADMIN_CREATE_TOPICS}/{name}"


def delete_request(name: str) -> str:
    return f"{ADMIN_DELETE_TOPICS}/{name}"


def controlled_shutdown(broker_id: int) -> str:
    return f"{ADMIN_CONTROLLED_SHUTDOWN}/{broker_id}"


def create_partitions_request(name: str) -> str:
    return f"{ADMIN_CREATE_PARTITIONS}/{name}"


def child_of(path: str, parent: str) -> str | None:
    """The first path component below `parent`, or None when `path` is not below it."""
    prefix = parent + "/"
    if not path.startswith(prefix):
        return None
    return path[len(prefix) :].split("/", 1)[0] or None
