"""Immutable views of the cluster, as the broker answers Metadata requests from them.

A `ClusterSnapshot` is never changed once published: the registry builds a new one and swaps the
reference, so a handler can read one consistent view without locks. Mappings are typed read-only;
nobody may mutate them.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from tributary.broker.security.listeners import Endpoint
from tributary.protocol.primitives import NULL_UUID

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    datacenter: str | None = None
    #: broker.rack: replicas of a partition go to as many racks as there are (Kafka's
    #: rack-aware placement); without one the datacenter stands for it.
    rack: str | None = None
    #: The registration's creation zxid (Kafka's broker epoch, KIP-380): a broker that died and
    #: registered again between two looks of the controller is told apart by a new value.
    epoch: int = -1
    #: Every advertised listener (``endpoints`` of the registration). ``host``/``port`` are the
    #: inter-broker listener's.
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def placement_rack(self) -> str | None:
        return self.rack if self.rack is not None else self.datacenter

    def address(self, listener: str) -> tuple[str, int] | None:
        """Where clients of ``listener`` reach this broker; None when it has no such listener
        (Kafka leaves such a broker out of Metadata). A registration without endpoints has one
        address for every listener."""
        if not self.endpoints:
            return self.host, self.port
        for endpoint in self.endpoints:
            if endpoint.name == listener:
                return endpoint.host, endpoint.port
        return None


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leadership of one partition.

    `leader` is NO_LEADER (-1) while no replica in the ISR is alive. `leader_epoch` grows each
    time a live broker becomes leader, and is what the leader writes into partitionLeaderEpoch.
    """

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: The state znode's last modification (mzxid). A leader whose registration (its broker
    #: epoch, a czxid) is newer restarted since it was given the partition: it must not lead
    #: on, as if nothing happened, until the controller has elected again.
    zxid: int = -1
    #: A reassignment under way (KIP-455): replicas being added (catching up, not yet
    #: counted on) and being removed (until the target replicas are all in sync).
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def online(self) -> bool:
        return self.leader != NO_LEADER


def stale_leadership(state: PartitionState, brokers: Mapping[int, BrokerInfo]) -> bool:
    """Whether the partition's leader registered again (restarted) after it was made leader."""
    leader = brokers.get(state.leader)
    return leader is not None and state.zxid >= 0 and leader.epoch > state.zxid


def registered_since(zxid: int, replicas: Collection[int], brokers: Mapping[int, BrokerInfo]) -> frozenset[int]:
    """Which of `replicas` registered (restarted, or lost their session) after the ZooKeeper
    transaction `zxid`, e.g. after a partition state was written."""
    if zxid < 0:
        return frozenset()
    return frozenset(b for b in replicas if (info := brokers.get(b)) is not None and info.epoch > zxid)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: Mapping[int, PartitionState]
    config: Mapping[str, str] = field(default_factory=dict)
    # Kafka's topic id (base64url of 16 random bytes); tells a recreated topic from the old one.
    topic_id: str = ""

    @property
    def uuid(self) -> uuid.UUID:
        """The topic id as the wire carries it (Metadata v10+, Fetch v13+); the null UUID for a
        topic whose znode has none yet (the controller gives it one)."""
        return topic_uuid(self.topic_id)


def same_topic(before: TopicInfo, after: TopicInfo | None) -> bool:
    """Whether ``after`` is still the topic ``before`` was, not a deleted and recreated one of the
    same name: the same topic id, or an id given to a topic that had none (the controller gives
    one to topics written without, by Kafka before 2.8 or by a foreign tool)."""
    return after is not None and (after.topic_id == before.topic_id or not before.topic_id)


def topic_uuid(text: str) -> uuid.UUID:
    """Kafka's textual topic id (``Uuid.toString``: base64url, no padding) as a UUID; the null
    UUID for an empty or malformed one."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return NULL_UUID
    return uuid.UUID(bytes=raw) if len(raw) == 16 else NULL_UUID


def topic_id_text(value: uuid.UUID) -> str:
    """The inverse of :func:`topic_uuid`: how Kafka writes a topic id into ZooKeeper."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True, order=True)
class ReplicaKey:
    """One partition replica a broker must hold a log for."""

    topic: str
    partition: int
    topic_id: str


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicInfo]
    controller_id: int | None
    cluster_id: str
    # Grows by one with every published change; equal versions mean equal snapshots.
    version: int = 0
    # Topic by id (Fetch v13+, Metadata v12, DeleteTopics v6), built on first use: the snapshot
    # never changes, so neither does the index.
    _by_uuid: dict[uuid.UUID, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def empty(cls) -> ClusterSnapshot:
        return cls(brokers={}, topics={}, controller_id=None, cluster_id="", version=0)

    @property
    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self.brokers)

    @property
    def controller(self) -> BrokerInfo | None:
        return None if self.controller_id is None else self.brokers.get(self.controller_id)

    def topic_by_uuid(self, topic_id: uuid.UUID) -> TopicInfo | None:
        if topic_id == NULL_UUID:
            return None
        if not self._by_uuid and self.topics:
            self._by_uuid.update((info.uuid, name) for name, info in self.topics.items() if info.topic_id)
        name = self._by_uuid.get(topic_id)
        return None if name is None else self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(partition)

    def leader_for(self, topic: str, partition: int) -> BrokerInfo | None:
        """The live leader of a partition, or None (unknown partition, or leader -1)."""
        state = self.partition(topic, partition)
        if state is None or not state.online:
            return None
        return self.brokers.get(state.leader)

    def replicas_of(self, broker_id: int) -> frozenset[ReplicaKey]:
        """Every partition replica assigned to a broker, led or not."""
        return frozenset(
            ReplicaKey(topic.name, index, topic.topic_id)
            for topic in self.topics.values()
            for index, state in topic.partitions.items()
            if broker_id in state.replicas
        )


@dataclass(frozen=True, slots=True)
class AssignmentChange:
    """What changed in one broker's replica set between two snapshots.

    A topic deleted and recreated under the same name shows as removed (old topic_id) plus added
    (new topic_id), so the broker drops the old log rather than reusing it.
    """

    added: frozenset[ReplicaKey]
    removed: frozenset[ReplicaKey]
    snapshot: ClusterSnapshot
