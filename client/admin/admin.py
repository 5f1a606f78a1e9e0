"""Admin operations: topics, cluster description, offsets, consumer groups.

``Admin(cluster)`` is a thin layer over a :class:`~client.cluster.Cluster`
(cheap to make; the Producer and Consumer use it for offset lookups). Each
operation retries retriable errors (after a metadata refresh, or a fresh
coordinator lookup) until ``timeout`` (default ``api_timeout``) and raises a
:class:`~client.errors.KafkaError` naming the topic, partition, group and
broker otherwise.

Group operations need the broker's group APIs (FindCoordinator, ListGroups,
DescribeGroups, OffsetFetch); a broker without them answers with
UnsupportedVersionError, which :meth:`Admin.supports_groups` checks first.

ACLs (DescribeAcls, CreateAcls, DeleteAcls) go to any broker, in Kafka's ACL model
(:mod:`tributary.protocol.acl`).

Topic growth and configs (CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs/AlterConfigs), group deletion (DeleteGroups), offset
resets (OffsetCommit as an admin, outside the group's membership) and sizes on
disk (DescribeLogDirs) are here too; :meth:`Admin.log_dir_sizes` returns
nothing for brokers that do not offer DescribeLogDirs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from tributary.client.admin import acls as acl_requests
from tributary.client.admin.configs import AlterConfigOp, ConfigEntry, ConfigSource, ResourceType
from tributary.client.admin.delete_records import delete_records
from tributary.client.admin.transactions import (
    TransactionDescription,
    TransactionListing,
    describe_transactions,
    list_transactions,
)
from tributary.client.errors import (
    KafkaError,
    KafkaProtocolError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnsupportedVersionError,
    error_for,
)
from tributary.client.raw.batches import (
    EARLIEST,
    LATEST,
    READ_UNCOMMITTED,
    ListedOffset,
    list_offsets_request,
    parse_list_offsets_response,
)
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import BrokerInfo, ClusterMetadata, TopicInfo, TopicPartition
from tributary.protocol import codec
from tributary.protocol.acl import ANY_BINDING, AclBinding, AclBindingFilter, ResourcePatternFilter
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    ApiKey,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteTopicsRequest,
    DescribeAclsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsResponse,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from tributary.protocol.primitives import Reader
from tributary.protocol.schema import Declared
from tributary.protocol.supported import CONSUMER_PROTOCOL_VERSIONS

GROUP_APIS = (ApiKey.FIND_COORDINATOR, ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS, ApiKey.OFFSET_FETCH)


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    #: -1: the broker's default.
    partitions: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    #: -1: the broker's default.
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A partition move under way (ListPartitionReassignments): the replica set now, and the
    replicas being added to it and removed from it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    #: The group's state when the broker reports it (ListGroups v4+), else "".
    state: str = ""
    coordinator: int = -1
    #: "classic" or "consumer" (KIP-848) when the broker reports it (ListGroups v5+), else "".
    group_type: str = ""


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    #: For consumer groups: the subscribed topics and the assigned partitions,
    #: decoded from the member's metadata and assignment.
    subscription: tuple[str, ...] = ()
    assignment: tuple[TopicPartition, ...] = ()
    member_metadata: bytes = b""
    member_assignment: bytes = b""
    #: Members of a consumer (KIP-848) group: the member epoch, and the regular expression
    #: the member subscribed with (its topics then come from the broker's evaluation).
    member_epoch: int = -1
    subscribed_regex: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    #: "Stable", "PreparingRebalance", "CompletingRebalance", "Empty" or "Dead" (unknown group);
    #: a consumer (KIP-848) group's "Empty", "Assigning", "Reconciling" or "Stable".
    state: str
    protocol_type: str
    #: The chosen assignor's name for consumer groups (the server-side assignor's for a
    #: consumer group).
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator: int
    #: "classic", or "consumer" for a KIP-848 group (described with ConsumerGroupDescribe).
    group_type: str = "classic"
    #: A consumer group's epoch (-1 for a classic group).
    group_epoch: int = -1


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionLag:
    committed: int
    latest: int

    @property
    def lag(self) -> int:
        return max(self.latest - self.committed, 0)


def _decode_consumer_protocol(data: bytes, cls: type[Any]) -> Any:
    """A consumer-protocol Subscription or Assignment: int16 version, then the body;
    newer versions decode as the newest one we know. None if it does not decode."""
    if not data:
        return None
    try:
        r = Reader(data)
        version = r.int16()
        hi = CONSUMER_PROTOCOL_VERSIONS.hi if CONSUMER_PROTOCOL_VERSIONS.hi is not None else version
        return codec.read(cls, r, min(max(version, 0), hi))
    except ProtocolError:
        return None


class _TopicResult(Protocol):
    """One topic's row in a CreateTopics, CreatePartitions or DeleteTopics response."""

    @property
    def name(self) -> str | None: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str | None: ...


class Admin:
    """Admin operations on a cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _deadline(self, timeout: float | None) -> float:
        return trio.current_time() + (self.cluster.config.api_timeout if timeout is None else timeout)

    async def _backoff_or_raise(self, error: KafkaError, deadline: float) -> None:
        self.cluster.note_error(error)
        if not error.retriable or trio.current_time() + self.cluster.config.retry_backoff > deadline:
            raise error
        await trio.sleep(self.cluster.config.retry_backoff)

    async def _per_topic_at_controller(
        self,
        names: Iterable[str],
        request_for: Callable[[list[str], int], Declared],
        results_of: Callable[[Any], Iterable[_TopicResult]],
        *,
        context: str,
        deadline: float,
        final: frozenset[ErrorCode] = frozenset(),
    ) -> list[KafkaError]:
        """Send a request with one entry per topic to the controller until every topic
        succeeded or failed for good, and return the failures in the order they came.

        ``request_for(names, timeout_ms)`` builds the request for the topics still to
        do; ``results_of(response)`` is the response's per-topic rows. A topic whose
        error is retriable (and its code not in ``final``) goes into the next round,
        after a backoff, as does the whole request when the controller cannot be
        reached; when ``deadline`` leaves no time for another round, that error is
        raised (as is any other error in sending). Any other error in a topic's row
        is that topic's failure."""
        remaining = dict.fromkeys(names)  # an ordered set: requests list topics as given
        failures: list[KafkaError] = []
        while remaining:
            timeout_ms = max(int((deadline - trio.current_time()) * 1000), 1)
            try:
                response = await self.cluster.send_to_controller(request_for(list(remaining), timeout_ms))
            except KafkaError as exc:
                await self._backoff_or_raise(exc, deadline)
                continue
            retry: list[KafkaError] = []
            for result in results_of(response):
                name = result.name
                if name is None or name not in remaining:
                    continue
                if not result.error_code:
                    del remaining[name]
                    continue
                error = error_for(result.error_code, topic=name, detail=result.error_message, context=context)
                if error.retriable and result.error_code not in final:
                    retry.append(error)
                else:
                    failures.append(error)
                    del remaining[name]
            if retry:
                await self._backoff_or_raise(retry[0], deadline)
        return failures

    # --- cluster and topics --------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        metadata = await self.cluster.refresh_metadata()
        return ClusterDescription(
            metadata.cluster_id,
            metadata.controller_id,
            tuple(sorted(metadata.brokers.values(), key=lambda b: b.node_id)),
        )

    async def list_topics(self, *, internal: bool = False) -> dict[str, TopicInfo]:
        """Every topic (without internal ones such as ``__consumer_offsets`` unless asked)."""
        metadata = await self.cluster.refresh_metadata()
        return {name: info for name, info in metadata.topics.items() if internal or not info.is_internal}

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        replication_factor: int = -1,
        exist_ok: bool = False,
        wait: bool = True,
        timeout: float | None = None,
    ) -> None:
        """Create one topic; see :meth:`create_topics`. ``exist_ok`` ignores TOPIC_ALREADY_EXISTS."""
        try:
            await self.create_topics(
                [NewTopic(name, partitions, configs or {}, replication_factor)], wait=wait, timeout=timeout
            )
        except TopicAlreadyExistsError:
            if not exist_ok:
                raise
            if wait:
                await self._wait_for_topics([name], timeout)

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        wait: bool = True,
        timeout: float | None = None,
    ) -> None:
        """Create topics (sent to the controller). Every topic is attempted; the
        first failure is raised afterwards (TopicAlreadyExistsError,
        InvalidPartitionsError, InvalidConfigError, ...). With ``wait``, returns
        once the metadata shows each created topic with a leader for every
        partition."""
        wanted = {t.name: t for t in topics}

        def request_for(names: list[str], timeout_ms: int) -> CreateTopicsRequest:
            return CreateTopicsRequest(
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name=t.name,
                        num_partitions=t.partitions,
                        replication_factor=t.replication_factor,
                        configs=[
                            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()
                        ],
                    )
                    for t in (wanted[name] for name in names)
                ],
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            )

        failures = await self._per_topic_at_controller(
            wanted,
            request_for,
            lambda response: response.topics,
            context="create topic",
            deadline=self._deadline(timeout),
        )
        if wait and not validate_only:
            failed = {e.topic for e in failures}
            await self._wait_for_topics([n for n in wanted if n not in failed], timeout)
        if failures:
            raise failures[0]

    async def _wait_for_topics(self, names: Sequence[str], timeout: float | None) -> ClusterMetadata:
        """Until the topics have a leader for every partition, and each leader knows
        it leads them: brokers learn of new topics one by one, and a leader that
        has not yet would answer UNKNOWN_TOPIC_OR_PARTITION."""
        deadline = self._deadline(timeout)
        what = f"topics {', '.join(names)} with leaders for every partition"

        def ready(metadata: ClusterMetadata) -> bool:
            for name in names:
                info = metadata.topics.get(name)
                if info is None or not info.partitions or any(p.leader < 0 for p in info.partitions.values()):
                    return False
            return True

        metadata = await self.cluster.wait_for_metadata(ready, what=what, timeout=timeout)
        leaders = {p.leader for name in names for p in metadata.topics[name].partitions.values()}
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in names], allow_auto_topic_creation=False
        )
        for leader in sorted(leaders):

            def led_here(view: ClusterMetadata, leader: int = leader) -> bool:
                return ready(view) and all(
                    p.leader == leader
                    for name in names
                    for p in view.topics[name].partitions.values()
                    if metadata.leader(name, p.partition) == leader
                )

            while True:
                try:
                    response: MetadataResponse = await self.cluster.send(leader, request)
                except KafkaError as exc:
                    await self._backoff_or_raise(exc, deadline)
                    continue
                if led_here(ClusterMetadata.from_response(response)):
                    break
                if trio.current_time() + self.cluster.config.retry_backoff > deadline:
                    raise RequestTimedOutError(f"broker {leader} did not learn of {what} in time", broker=leader)
                await trio.sleep(self.cluster.config.retry_backoff)
        return metadata

    async def delete_topics(self, names: Iterable[str], *, wait: bool = True, timeout: float | None = None) -> None:
        """Delete topics (sent to the controller); the first failure is raised after
        all were attempted (UnknownTopicOrPartitionError for a missing topic).
        With ``wait``, returns once the metadata no longer lists them."""
        wanted = set(names)
        failures = await self._per_topic_at_controller(
            wanted,
            lambda remaining, timeout_ms: DeleteTopicsRequest(topic_names=sorted(remaining), timeout_ms=timeout_ms),
            lambda response: response.responses,
            context="delete topic",
            deadline=self._deadline(timeout),
            # UNKNOWN_TOPIC_OR_PARTITION is retriable in general, not for a deletion.
            final=frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}),
        )
        if wait:
            failed = {e.topic for e in failures}
            gone = wanted - failed
            await self.cluster.wait_for_metadata(
                lambda m: not gone & set(m.topics), what=f"topics {', '.join(sorted(gone))} deleted", timeout=timeout
            )
        if failures:
            raise failures[0]

    async def create_partitions(
        self, counts: Mapping[str, int], *, validate_only: bool = False, timeout: float | None = None
    ) -> None:
        """Grow topics to the given partition counts (sent to the controller); the
        first failure is raised after all were attempted (InvalidPartitionsError
        when a count does not grow, UnknownTopicOrPartitionError). Returns once the
        metadata shows the new partitions with leaders, and their leaders know it."""
        failures = await self._per_topic_at_controller(
            counts,
            lambda remaining, timeout_ms: CreatePartitionsRequest(
                topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=counts[name], assignments=None)
                    for name in remaining
                ],
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            ),
            lambda response: response.results,
            context="add partitions",
            deadline=self._deadline(timeout),
            # A topic that does not exist will not appear by waiting: nothing to grow.
            final=frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}),
        )
        if not validate_only:
            failed = {e.topic for e in failures}
            grown = {name: count for name, count in counts.items() if name not in failed}
            if grown:
                await self.cluster.wait_for_metadata(
                    lambda m: all(
                        name in m.topics and len(m.topics[name].partitions) >= count for name, count in grown.items()
                    ),
                    what="the new partitions",
                    timeout=timeout,
                )
                await self._wait_for_topics(sorted(grown), timeout)
        if failures:
            raise failures[0]

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, ErrorCode]:
        """Move partitions back to their preferred replica (ElectLeaders, preferred election,
        sent to the controller); every partition with None. Returns each partition's outcome:
        NONE, ELECTION_NOT_NEEDED (it led already), PREFERRED_LEADER_NOT_AVAILABLE (down or out
        of sync), UNKNOWN_TOPIC_OR_PARTITION."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        timeout_ms = max(1, int((self._deadline(timeout) - trio.current_time()) * 1000))
        request = ElectLeadersRequest(
            election_type=0,
            topic_partitions=None
            if partitions is None
            else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()],
            timeout_ms=timeout_ms,
        )
        response = await self.cluster.send_to_controller(request, timeout=timeout_ms / 1000 + 5)
        if response.error_code:
            raise error_for(response.error_code, detail="elect leaders")
        return {
            TopicPartition(result.topic, p.partition_id): ErrorCode(p.error_code)
            for result in response.replica_election_results
            for p in result.partition_result
        }

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], *, timeout: float | None = None
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Start moving partitions to new replica lists, or cancel their move (None), as
        AlterPartitionReassignments to the controller. Each partition's outcome and message:
        NONE (started), INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, ..."""
        by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignablePartition]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(
                AlterPartitionReassignmentsRequest.ReassignablePartition(
                    partition_index=tp.partition, replicas=None if replicas is None else list(replicas)
                )
            )
        timeout_ms = max(1, int((self._deadline(timeout) - trio.current_time()) * 1000))
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=timeout_ms,
            topics=[
                AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )
        response = await self.cluster.send_to_controller(request, timeout=timeout_ms / 1000 + 5)
        if response.error_code:
            raise error_for(response.error_code, detail=f"alter partition reassignments: {response.error_message}")
        return {
            TopicPartition(topic.name, p.partition_index): (ErrorCode(p.error_code), p.error_message)
            for topic in response.responses
            for p in topic.partitions
        }

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The partition moves under way (of ``partitions``, or all), from the controller."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [
                ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                for t, ps in by_topic.items()
            ]
        timeout_ms = max(1, int((self._deadline(timeout) - trio.current_time()) * 1000))
        request = ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics)
        response = await self.cluster.send_to_controller(request, timeout=timeout_ms / 1000 + 5)
        if response.error_code:
            raise error_for(response.error_code, detail=f"list partition reassignments: {response.error_message}")
        return {
            TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def describe_configs(
        self,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        keys: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, dict[str, ConfigEntry]]:
        """Configs by resource name, then config name (all of them, or ``keys``).
        Broker configs are asked of that broker; topic configs of any."""
        deadline = self._deadline(timeout)
        wanted = list(dict.fromkeys(names))
        key_list = None if keys is None else list(keys)
        out: dict[str, dict[str, ConfigEntry]] = {}
        for name in wanted:
            request = DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=resource_type, resource_name=name, configuration_keys=key_list
                    )
                ]
            )
            while True:
                try:
                    if resource_type == ResourceType.BROKER and name:
                        response: DescribeConfigsResponse = await self.cluster.send(int(name), request)
                    else:
                        response = await self.cluster.send_to_any(request)
                    result = next((r for r in response.results if r.resource_name == name), None)
                    if result is None:
                        raise KafkaProtocolError(f"DescribeConfigs answered without {name!r}")
                    if result.error_code:
                        topic = name if resource_type == ResourceType.TOPIC else None
                        error = error_for(
                            result.error_code, topic=topic, detail=result.error_message, context="describe configs"
                        )
                        # UNKNOWN_TOPIC_OR_PARTITION is retriable in general, not for a description.
                        error.retriable &= result.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        raise error
                except KafkaError as exc:
                    await self._backoff_or_raise(exc, deadline)
                    continue
                break
            out[name] = {
                c.name: ConfigEntry(
                    c.name,
                    c.value,
                    c.is_default or c.config_source in (ConfigSource.DEFAULT_CONFIG, ConfigSource.STATIC_BROKER_CONFIG),
                    c.read_only,
                    c.is_sensitive,
                    max(c.config_source, 0),
                )
                for c in result.configs
            }
        return out

    async def alter_topic_configs(
        self,
        changes: Mapping[str, Mapping[str, str | None]],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Set (a string) or reset to the default (None) configs of topics, leaving
        the others as they are. Uses IncrementalAlterConfigs, or on brokers without
        it, DescribeConfigs and AlterConfigs with the topic's other overrides
        (racing with concurrent changes, as every client does there). The first
        failure is raised after all topics were attempted (InvalidConfigError, ...)."""
        deadline = self._deadline(timeout)
        failures: list[KafkaError] = []
        for topic, change in changes.items():
            while True:
                try:
                    code, message = await self._alter_topic_config(topic, change, validate_only)
                except KafkaError as exc:
                    await self._backoff_or_raise(exc, deadline)
                    continue
                if code:
                    error = error_for(code, topic=topic, detail=message, context="alter configs")
                    if error.retriable and code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        await self._backoff_or_raise(error, deadline)
                        continue
                    failures.append(error)
                break
        if failures:
            raise failures[0]

    async def _alter_topic_config(
        self, topic: str, change: Mapping[str, str | None], validate_only: bool
    ) -> tuple[int, str | None]:
        broker = self.cluster.least_loaded_broker()
        if broker is None:
            broker = next(iter((await self.cluster.refresh_metadata()).brokers))
        versions = await self.cluster.api_versions(broker)
        if versions.supports(ApiKey.INCREMENTAL_ALTER_CONFIGS):
            request = IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=ResourceType.TOPIC,
                        resource_name=topic,
                        configs=[
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name=k, config_operation=AlterConfigOp.SET if v is not None else AlterConfigOp.DELETE,
                                value=v,
                            )
                            for k, v in change.items()
                        ],
                    )
                ],
                validate_only=validate_only,
            )  # fmt: skip
            response: IncrementalAlterConfigsResponse | AlterConfigsResponse = await self.cluster.send(broker, request)
        else:
            current = (await self.describe_configs(ResourceType.TOPIC, [topic]))[topic]
            merged = {name: e.value for name, e in current.items() if not e.is_default and not e.read_only}
            merged.update(change)
            alter = AlterConfigsRequest(
                resources=[
                    AlterConfigsRequest.AlterConfigsResource(
                        resource_type=ResourceType.TOPIC,
                        resource_name=topic,
                        configs=[
                            AlterConfigsRequest.AlterableConfig(name=k, value=v)
                            for k, v in merged.items()
                            if v is not None
                        ],
                    )
                ],
                validate_only=validate_only,
            )
            response = await self.cluster.send(broker, alter)
        result = next((r for r in response.responses if r.resource_name == topic), None)
        if result is None:
            raise KafkaProtocolError(f"broker {broker} answered AlterConfigs without topic {topic!r}", broker=broker)
        return result.error_code, result.error_message

    async def log_dir_sizes(
        self, topics: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """Bytes on disk per partition replica, summed over the brokers holding one
        (DescribeLogDirs; brokers without it are left out, so a partition may be
        missing)."""
        deadline = self._deadline(timeout)
        metadata = await self.cluster.refresh_metadata()
        request_topics = None
        if topics is not None:
            request_topics = [
                DescribeLogDirsRequest.DescribableLogDirTopic(
                    topic=name, partitions=sorted(metadata.topics[name].partitions) if name in metadata.topics else []
                )
                for name in topics
            ]
        sizes: dict[TopicPartition, int] = {}
        for broker in sorted(metadata.brokers):
            while True:
                try:
                    if not (await self.cluster.api_versions(broker)).supports(ApiKey.DESCRIBE_LOG_DIRS):
                        break
                    response: DescribeLogDirsResponse = await self.cluster.send(
                        broker, DescribeLogDirsRequest(topics=request_topics)
                    )
                except UnsupportedVersionError:
                    break
                except KafkaError as exc:
                    await self._backoff_or_raise(exc, deadline)
                    continue
                for log_dir in response.results:
                    if log_dir.error_code:
                        continue  # an offline log dir: its sizes are unknown
                    for t in log_dir.topics:
                        for p in t.partitions:
                            if not p.is_future_key:
                                tp = TopicPartition(t.name, p.partition_index)
                                sizes[tp] = sizes.get(tp, 0) + p.partition_size
                break
        return sizes

    # --- offsets -------------------------------------------------------------------------------

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: int = READ_UNCOMMITTED,
        timeout: float | None = None,
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets by :data:`~client.batches.EARLIEST`, :data:`~client.batches.LATEST`
        or timestamp (ms) per partition, asked of each partition's leader."""
        deadline = self._deadline(timeout)
        remaining = dict(specs)
        results: dict[TopicPartition, ListedOffset] = {}
        while remaining:
            outcome = await self._list_offsets_once(remaining, isolation_level)
            retry: KafkaError | None = None
            for tp, result in outcome.items():
                if isinstance(result, ListedOffset):
                    results[tp] = result
                    del remaining[tp]
                elif result.retriable:
                    retry = retry or result
                    self.cluster.note_error(result)
                else:
                    raise result
            if retry is not None:
                await self._backoff_or_raise(retry, deadline)
                await self.cluster.refresh_metadata()
        return results

    async def _list_offsets_once(
        self, specs: Mapping[TopicPartition, int], isolation_level: int
    ) -> dict[TopicPartition, ListedOffset | KafkaError]:
        outcome: dict[TopicPartition, ListedOffset | KafkaError] = {}
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, spec in specs.items():
            try:
                leader = await self.cluster.leader_for(tp.topic, tp.partition)
            except KafkaError as exc:
                outcome[tp] = exc
                continue
            by_leader.setdefault(leader, {})[tp] = spec

        async def ask(leader: int, subset: dict[TopicPartition, int]) -> None:
            try:
                response: ListOffsetsResponse = await self.cluster.send(
                    leader, list_offsets_request(subset, isolation_level=isolation_level)
                )
            except KafkaError as exc:
                outcome.update(dict.fromkeys(subset, exc))
                return
            outcome.update(parse_list_offsets_response(response, subset, leader))

        async with trio.open_nursery() as nursery:
            for leader, subset in by_leader.items():
                nursery.start_soon(ask, leader, subset)
        return outcome

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """Delete every record below each partition's offset (-1: its high watermark); returns
        each partition's new low watermark (see :mod:`client.admin.delete_records`)."""
        return await delete_records(self.cluster, offsets, self._deadline(timeout))

    async def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        listed = await self.list_offsets(dict.fromkeys(partitions, EARLIEST))
        return {tp: r.offset for tp, r in listed.items()}

    # --- transactions (client/admin/transactions.py) ---------------------------------------------

    async def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
        timeout: float | None = None,
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster (ListTransactions to every broker), filtered."""
        return await list_transactions(
            self.cluster, states=states, producer_ids=producer_ids, duration_ms=duration_ms, timeout=timeout
        )

    async def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TransactionDescription]:
        """Each transactional id's state, producer and open partitions, from its coordinator."""
        return await describe_transactions(self.cluster, transactional_ids, timeout=timeout)

    async def latest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        listed = await self.list_offsets(dict.fromkeys(partitions, LATEST))
        return {tp: r.offset for tp, r in listed.items()}

    async def partitions_of(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions (UnknownTopicOrPartitionError if there is no such topic)."""
        metadata = self.cluster.metadata
        if topic not in metadata.topics:
            metadata = await self.cluster.refresh_metadata()
        if topic not in metadata.topics:
            raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=topic, context="partitions of topic")
        return [TopicPartition(topic, p) for p in metadata.partitions_for(topic)]

    # --- groups --------------------------------------------------------------------------------

    async def supports_groups(self) -> bool:
        """Whether a broker advertises the group APIs these operations use."""
        broker = self.cluster.least_loaded_broker()
        if broker is None:
            broker = next(iter((await self.cluster.refresh_metadata()).brokers))
        versions = await self.cluster.api_versions(broker)
        return all(versions.supports(api) for api in GROUP_APIS)

    async def list_groups(self, *, timeout: float | None = None) -> list[GroupListing]:
        """Every group, from every broker (each lists the groups it coordinates)."""
        deadline = self._deadline(timeout)
        metadata = await self.cluster.refresh_metadata()
        listings: dict[str, GroupListing] = {}
        for broker in sorted(metadata.brokers):
            while True:
                try:
                    response: ListGroupsResponse = await self.cluster.send(broker, ListGroupsRequest())
                    if response.error_code:
                        raise error_for(response.error_code, broker=broker, context="list groups")
                except KafkaError as exc:
                    await self._backoff_or_raise(exc, deadline)
                    continue
                for g in response.groups:
                    listings[g.group_id] = GroupListing(
                        g.group_id, g.protocol_type, g.group_state, broker, g.group_type.lower()
                    )
                break
        return sorted(listings.values(), key=lambda g: g.group_id)

    async def _coordinated(self, group_id: str, request: Any, deadline: float) -> Any:
        """Send to the group's coordinator, once more after a coordinator move."""
        while True:
            try:
                return await self.cluster.send_to_coordinator(group_id, request)
            except KafkaError as exc:
                self.cluster.forget_coordinator(group_id)
                await self._backoff_or_raise(exc, deadline)

    def _group_error(self, group_id: str, code: int, context: str, broker: int) -> KafkaError:
        error = error_for(code, broker=broker, context=f"{context} for group {group_id!r}")
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self.cluster.forget_coordinator(group_id)
        return error

    async def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, GroupDescription]:
        """Each group's state, protocol and members (with decoded subscriptions and
        assignments for consumer groups). An unknown group comes back in state "Dead".

        DescribeGroups describes classic groups only (Kafka answers "Dead", or from v6
        GROUP_ID_NOT_FOUND, for a KIP-848 consumer group): such an answer is followed by
        ConsumerGroupDescribe when the coordinator offers it, as Kafka's admin client does
        (it asks in the other order)."""
        deadline = self._deadline(timeout)
        out: dict[str, GroupDescription] = {}
        for group_id in group_ids:
            while True:
                coordinator = await self.cluster.coordinator_for(group_id)
                response: DescribeGroupsResponse = await self._coordinated(
                    group_id, DescribeGroupsRequest(groups=[group_id]), deadline
                )
                described = [g for g in response.groups if g.group_id == group_id]
                if not described:
                    raise KafkaError(f"broker {coordinator} did not describe group {group_id!r}", broker=coordinator)
                group = described[0]
                not_classic = group.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
                    not group.error_code and group.group_state == "Dead"
                )
                if group.error_code and not not_classic:
                    error = self._group_error(group_id, group.error_code, "describe", coordinator)
                    await self._backoff_or_raise(error, deadline)
                    continue
                if not_classic and (await self.cluster.api_versions(coordinator)).supports(
                    ApiKey.CONSUMER_GROUP_DESCRIBE
                ):
                    consumer = await self._consumer_group_description(group_id, coordinator, deadline)
                    if consumer is None:  # the coordinator moved: ask again
                        continue
                    out[group_id] = consumer
                    break
                out[group_id] = (
                    GroupDescription(group_id, "Dead", "", "", (), coordinator)
                    if group.error_code
                    else self._description(group, coordinator)
                )
                break
        return out

    async def _consumer_group_description(
        self, group_id: str, coordinator: int, deadline: float
    ) -> GroupDescription | None:
        """ConsumerGroupDescribe at the coordinator: the group as a consumer group, state
        "Dead" if there is no such group either, None after a retriable error (backed off)."""
        response: ConsumerGroupDescribeResponse = await self._coordinated(
            group_id, ConsumerGroupDescribeRequest(group_ids=[group_id]), deadline
        )
        group = next((g for g in response.groups if g.group_id == group_id), None)
        if group is None:
            raise KafkaError(f"broker {coordinator} did not describe group {group_id!r}", broker=coordinator)
        if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return GroupDescription(group_id, "Dead", "", "", (), coordinator)
        if group.error_code:
            error = self._group_error(group_id, group.error_code, "describe", coordinator)
            await self._backoff_or_raise(error, deadline)
            return None
        members = tuple(
            MemberDescription(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                group_instance_id=m.instance_id,
                subscription=tuple(m.subscribed_topic_names),
                assignment=tuple(
                    TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
                ),
                member_epoch=m.member_epoch,
                subscribed_regex=m.subscribed_topic_regex,
            )
            for m in group.members
        )
        return GroupDescription(
            group_id,
            group.group_state,
            "consumer",
            group.assignor_name,
            members,
            coordinator,
            group_type="consumer",
            group_epoch=group.group_epoch,
        )

    @staticmethod
    def _description(group: DescribeGroupsResponse.DescribedGroup, coordinator: int) -> GroupDescription:
        members = []
        for m in group.members:
            subscription: tuple[str, ...] = ()
            assignment: tuple[TopicPartition, ...] = ()
            if group.protocol_type == "consumer":
                sub = _decode_consumer_protocol(m.member_metadata, ConsumerProtocolSubscription)
                if sub is not None:
                    subscription = tuple(sub.topics)
                assigned = _decode_consumer_protocol(m.member_assignment, ConsumerProtocolAssignment)
                if assigned is not None:
                    assignment = tuple(
                        TopicPartition(t.topic, p) for t in assigned.assigned_partitions for p in t.partitions
                    )
            members.append(
                MemberDescription(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    group_instance_id=m.group_instance_id,
                    subscription=subscription,
                    assignment=assignment,
                    member_metadata=m.member_metadata,
                    member_assignment=m.member_assignment,
                )
            )
        return GroupDescription(
            group.group_id, group.group_state, group.protocol_type, group.protocol_data, tuple(members), coordinator
        )

    async def committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets (OffsetFetch from its coordinator), for the
        given partitions or all it committed; partitions without a commit are left out."""
        deadline = self._deadline(timeout)
        topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [
                OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
            ]
        while True:
            coordinator = await self.cluster.coordinator_for(group_id)
            try:
                response: OffsetFetchResponse = await self._coordinated(
                    group_id, OffsetFetchRequest(group_id=group_id, topics=topics), deadline
                )
            except KafkaProtocolError:
                if topics is not None:
                    raise
                # Some brokers (Tansu 0.6) answer "all topics" (null) with a malformed
                # response: name every topic instead.
                metadata = await self.cluster.refresh_metadata()
                topics = [
                    OffsetFetchRequest.OffsetFetchRequestTopic(name=name, partition_indexes=sorted(info.partitions))
                    for name, info in sorted(metadata.topics.items())
                ]
                continue
            codes = [response.error_code] + [p.error_code for t in response.topics for p in t.partitions]
            code = next((c for c in codes if c), 0)
            if code:
                error = self._group_error(group_id, code, "fetch committed offsets", coordinator)
                if error.retriable:
                    await self._backoff_or_raise(error, deadline)
                    continue
                failed = next(
                    ((t.name, p.partition_index) for t in response.topics for p in t.partitions if p.error_code), None
                )
                if failed is not None:
                    raise error_for(code, topic=failed[0], partition=failed[1], broker=coordinator,
                                    context=f"fetch committed offsets for group {group_id!r}")  # fmt: skip
                raise error
            return {
                TopicPartition(t.name, p.partition_index): CommittedOffset(
                    p.committed_offset, p.metadata, p.committed_leader_epoch
                )
                for t in response.topics
                for p in t.partitions
                if p.committed_offset >= 0
            }

    async def delete_groups(self, group_ids: Iterable[str], *, timeout: float | None = None) -> None:
        """Delete groups (each at its coordinator) with their committed offsets. Only
        groups without members can go: GroupNotEmptyError otherwise, and
        GroupIdNotFoundError for an unknown group; the first failure is raised after
        all were attempted."""
        deadline = self._deadline(timeout)
        failures: list[KafkaError] = []
        for group_id in dict.fromkeys(group_ids):
            while True:
                coordinator = await self.cluster.coordinator_for(group_id)
                response: DeleteGroupsResponse = await self._coordinated(
                    group_id, DeleteGroupsRequest(groups_names=[group_id]), deadline
                )
                code = next((r.error_code for r in response.results if r.group_id == group_id), None)
                if code is None:
                    raise KafkaError(f"broker {coordinator} did not answer for group {group_id!r}", broker=coordinator)
                if code:
                    error = self._group_error(group_id, code, "delete", coordinator)
                    if error.retriable:
                        await self._backoff_or_raise(error, deadline)
                        continue
                    failures.append(error)
                break
        if failures:
            raise failures[0]

    async def alter_committed_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> None:
        """Commit offsets for a group as an admin tool (no member id, no generation),
        which the coordinator accepts only while the group has no members:
        UnknownMemberIdError (Kafka's answer) while it has some."""
        deadline = self._deadline(timeout)
        by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=offset, committed_metadata=""
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        while True:
            coordinator = await self.cluster.coordinator_for(group_id)
            response: OffsetCommitResponse = await self._coordinated(group_id, request, deadline)
            failed = next(((t.name, p) for t in response.topics for p in t.partitions if p.error_code), None)
            if failed is None:
                return
            name, partition = failed
            error = self._group_error(group_id, partition.error_code, "commit offsets", coordinator)
            if error.retriable:
                await self._backoff_or_raise(error, deadline)
                continue
            raise error_for(partition.error_code, topic=name, partition=partition.partition_index, broker=coordinator,
                            context=f"commit offsets for group {group_id!r}")  # fmt: skip

    # --- ACLs ----------------------------------------------------------------------------------

    async def _to_any_broker(self, request: Any, deadline: float) -> Any:
        while True:
            try:
                return await self.cluster.send_to_any(request)
            except KafkaError as exc:
                await self._backoff_or_raise(exc, deadline)

    async def describe_acls(
        self, binding_filter: AclBindingFilter = ANY_BINDING, *, timeout: float | None = None
    ) -> list[AclBinding]:
        """The ACLs the filter matches (every one by default), as the broker lists them.
        SECURITY_DISABLED when the cluster runs no authorizer; CLUSTER_AUTHORIZATION_FAILED
        without Describe on the Cluster."""
        deadline = self._deadline(timeout)
        while True:
            response: DescribeAclsResponse = await self._to_any_broker(
                acl_requests.describe_request(binding_filter), deadline
            )
            if not response.error_code:
                return acl_requests.described(response)
            await self._backoff_or_raise(
                error_for(response.error_code, detail=response.error_message, context="describe ACLs"), deadline
            )

    async def create_acls(
        self, bindings: Sequence[AclBinding], *, wait: bool = True, timeout: float | None = None
    ) -> None:
        """Add ACLs (one request, so they are stored together or refused one by one); the first
        refusal is raised once all were answered (INVALID_REQUEST names what is wrong with a
        binding; CLUSTER_AUTHORIZATION_FAILED without Alter on the Cluster). With ``wait``,
        returns once every broker lists them (each learns of ACLs on its own, from ZooKeeper)."""
        if not bindings:
            return
        deadline = self._deadline(timeout)
        response: CreateAclsResponse = await self._to_any_broker(acl_requests.create_request(bindings), deadline)
        for binding, result in zip(bindings, response.results, strict=False):
            if result.error_code:
                raise error_for(result.error_code, detail=result.error_message, context=f"create ACL {binding.pattern}")
        if wait:
            wanted = set(bindings)
            await self._until_every_broker(wanted, lambda listed: wanted <= listed, "the new ACLs", deadline)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, wait: bool = True, timeout: float | None = None
    ) -> list[list[AclBinding]]:
        """Remove the ACLs each filter matches; for each filter, the bindings it removed. The
        first refusal (of a filter, or of one binding) is raised once all were answered. With
        ``wait``, returns once no broker lists the removed ACLs any more."""
        if not filters:
            return []
        deadline = self._deadline(timeout)
        response: DeleteAclsResponse = await self._to_any_broker(acl_requests.delete_request(filters), deadline)
        removed: list[list[AclBinding]] = []
        failure: KafkaError | None = None
        for result in response.filter_results:
            if result.error_code:
                failure = failure or error_for(result.error_code, detail=result.error_message, context="delete ACLs")
            kept = []
            for binding, code, message in acl_requests.deleted(result):
                if code:
                    failure = failure or error_for(code, detail=message, context=f"delete ACL {binding.pattern}")
                else:
                    kept.append(binding)
            removed.append(kept)
        if failure is not None:
            raise failure
        gone = {b for found in removed for b in found}
        if wait and gone:
            await self._until_every_broker(gone, lambda listed: not gone & listed, "the removal of ACLs", deadline)
        return removed

    async def _until_every_broker(
        self, bindings: set[AclBinding], done: Callable[[set[AclBinding]], bool], what: str, deadline: float
    ) -> None:
        """Until ``done(the bindings of these patterns that a broker lists)`` holds on every broker."""
        patterns = {b.pattern for b in bindings}
        requests = [
            acl_requests.describe_request(
                AclBindingFilter(ResourcePatternFilter(p.resource_type, p.name, p.pattern_type))
            )
            for p in patterns
        ]
        metadata = await self.cluster.refresh_metadata()
        for broker in sorted(metadata.brokers):
            while True:
                listed: set[AclBinding] = set()
                try:
                    for request in requests:
                        response: DescribeAclsResponse = await self.cluster.send(broker, request)
                        if response.error_code:
                            raise error_for(response.error_code, broker=broker, detail=response.error_message)
                        listed.update(acl_requests.described(response))
                except KafkaError as exc:
                    await self._backoff_or_raise(exc, deadline)
                    continue
                if done(listed):
                    break
                if trio.current_time() + self.cluster.config.retry_backoff > deadline:
                    raise RequestTimedOutError(f"broker {broker} did not show {what} in time", broker=broker)
                await trio.sleep(0.05)

    async def group_lag(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, PartitionLag]:
        """Per partition with a committed offset: committed, latest and lag (latest - committed)."""
        committed = await self.committed_offsets(group_id, partitions, timeout=timeout)
        latest = await self.list_offsets(dict.fromkeys(committed, LATEST), timeout=timeout)
        return {tp: PartitionLag(c.offset, latest[tp].offset) for tp, c in committed.items()}


__all__ = [
    "Admin",
    "ClusterDescription",
    "CommittedOffset",
    "ConfigEntry",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "NewTopic",
    "PartitionLag",
    "PartitionReassignment",
]
