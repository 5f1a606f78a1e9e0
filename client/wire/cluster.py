"""The cluster: bootstrap, metadata cache, connection pool, coordinators.

``async with Cluster("host:9092,host2:9092") as cluster`` asks the bootstrap
servers for Metadata and keeps the answer as an immutable
:class:`~client.metadata.ClusterMetadata` snapshot (``cluster.metadata``),
replaced on every refresh. Refreshes happen

- every ``metadata_max_age`` seconds, in a background task;
- soon after an error that says the metadata is stale
  (``invalidates_metadata``: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
  LEADER_NOT_AVAILABLE, a broken connection, ...), which
  :meth:`Cluster.send` notices itself and other callers report with
  :meth:`Cluster.note_error`; at most one per ``retry_backoff``;
- on demand, :meth:`Cluster.refresh_metadata`; concurrent callers share a
  refresh that started after they asked.

Metadata is asked of a connected broker first, then any other known broker,
then the bootstrap servers again, so the client survives the loss of the
brokers it started from.

Connections are pooled by broker id, opened on first use and kept in the
cluster's nursery. A connection that breaks is dropped; the next request
reconnects, after an exponential backoff (``reconnect_backoff`` doubling up
to ``reconnect_backoff_max``, with jitter) while attempts keep failing.
Requests are never retried here: whether a retry is safe (a produce may
duplicate) is the caller's decision, made with the errors' ``retriable`` flag.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import trio

from tributary.client._tasks import background_nursery
from tributary.client.backoff import doubled, jittered
from tributary.client.config import ClientConfig
from tributary.client.errors import (
    BrokerNotAvailableError,
    KafkaConnectionError,
    KafkaError,
    LeaderNotAvailableError,
    NoBrokersAvailableError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    error_for,
)
from tributary.client.wire.buffers import ReceiveBuffers
from tributary.client.wire.connection import BrokerConnection, connect
from tributary.client.wire.metadata import ClusterMetadata, TopicPartition
from tributary.client.wire.versions import BrokerApiVersions
from tributary.protocol.messages import ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest
from tributary.protocol.schema import Declared

log = logging.getLogger(__name__)

#: Connection purposes: each broker gets one pooled connection per purpose in use.
#: Group coordination has its own (as in Kafka's Java client), so a JoinGroup
#: that waits for a rebalance never holds up fetches queued behind it.
DEFAULT = "default"
COORDINATOR = "coordinator"

#: FindCoordinator key types.
GROUP_COORDINATOR = 0
TRANSACTION_COORDINATOR = 1


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"host:port,host:port"`` (or a list of ``host:port``) as (host, port) pairs."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {text!r} is not host:port")
        result.append((host.strip("[]"), int(port)))
    if not result:
        raise ValueError("no bootstrap servers given")
    return result


@dataclass(eq=False)
class _Link:
    """One pooled connection to a broker."""

    lock: trio.Lock = field(default_factory=trio.Lock)
    conn: BrokerConnection | None = None

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed


@dataclass(eq=False)
class _Broker:
    """A pool entry: where a broker is, its connections by purpose, and its reconnect backoff."""

    broker_id: int
    host: str
    port: int
    links: dict[str, _Link] = field(default_factory=dict)
    failures: int = 0
    retry_at: float = float("-inf")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def link(self, purpose: str) -> _Link:
        return self.links.setdefault(purpose, _Link())

    @property
    def connected(self) -> bool:
        return self.link(DEFAULT).connected

    @property
    def in_flight(self) -> int:
        conn = self.link(DEFAULT).conn
        return conn.in_flight if conn is not None else 0

    def close_all(self, reason: str) -> None:
        for link in self.links.values():
            if link.conn is not None:
                link.conn.close(reason)


class Cluster:
    """Metadata, connections and coordinators of one Kafka cluster; an async context manager."""

    def __init__(self, bootstrap_servers: str | Sequence[str], config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self.bootstrap_servers = parse_bootstrap(bootstrap_servers)
        #: The latest snapshot; it never changes, a refresh replaces it. A plain attribute rather than
        #: a property: the producer looks at it for every record it sends.
        self.metadata = ClusterMetadata()
        self._brokers: dict[int, _Broker] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._nursery: trio.Nursery | None = None
        self._stack: AsyncExitStack | None = None
        self._refresh_lock = trio.Lock()
        self._refreshes_started = 0
        self._last_refresh_start = 0
        self._last_refresh_at = float("-inf")
        self._refresh_wanted = trio.Event()
        self._metadata_updated = trio.Event()
        #: One pool of receive buffers for all the cluster's connections (client/wire/buffers.py).
        self._buffers = ReceiveBuffers(max_bytes=self.config.response_buffer_pool_bytes)

    # --- lifetime ------------------------------------------------------------------------------

    async def __aenter__(self) -> Cluster:
        if self._stack is not None:
            raise RuntimeError("a Cluster can be entered once")
        stack = AsyncExitStack()
        self._nursery = await stack.enter_async_context(background_nursery())
        try:
            await self.refresh_metadata()
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._nursery.start_soon(self._maintain_metadata)
        self._stack = stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._stack is not None
        for broker in self._brokers.values():
            broker.close_all("was closed by the client")
        return await self._stack.__aexit__(exc_type, exc, tb)

    @property
    def _tasks(self) -> trio.Nursery:
        if self._nursery is None:
            raise RuntimeError("use the Cluster inside `async with`")
        return self._nursery

    # --- metadata ------------------------------------------------------------------------------

    def request_metadata_refresh(self) -> None:
        """Have the background task refresh the metadata soon (without waiting for it)."""
        self._refresh_wanted.set()

    def note_error(self, error: BaseException) -> None:
        """Tell the cluster about an error from a response: stale-metadata errors
        schedule a refresh; coordinator errors forget the cached coordinator."""
        if isinstance(error, KafkaError) and error.invalidates_metadata:
            self.request_metadata_refresh()

    async def refresh_metadata(self) -> ClusterMetadata:
        """Fetch metadata now (or share a refresh that started after this call)."""
        called_at = self._refreshes_started
        async with self._refresh_lock:
            if self._last_refresh_start > called_at:
                return self.metadata
            self._refreshes_started += 1
            number = self._refreshes_started
            self._apply_metadata(await self._fetch_metadata())
            self._last_refresh_start = number
            self._last_refresh_at = trio.current_time()
            return self.metadata

    async def next_metadata(self) -> ClusterMetadata:
        """Wait for the next refresh to complete and return its snapshot."""
        await self._metadata_updated.wait()
        return self.metadata

    async def wait_for_metadata(
        self, predicate: Callable[[ClusterMetadata], bool], *, what: str = "", timeout: float | None = None
    ) -> ClusterMetadata:
        """Refresh until ``predicate(metadata)`` holds, pausing ``retry_backoff`` between
        refreshes; RequestTimedOutError (describing ``what``) after ``timeout``
        (default ``api_timeout``)."""
        timeout = self.config.api_timeout if timeout is None else timeout
        last_error: KafkaError | None = None
        with trio.move_on_after(timeout):
            while not predicate(self.metadata):
                try:
                    await self.refresh_metadata()
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last_error = exc
                if predicate(self.metadata):
                    break
                await trio.sleep(self.config.retry_backoff)
            return self.metadata
        raise RequestTimedOutError(
            f"metadata did not show {what or 'the expected state'} within {timeout:g} s"
            + (f" (last error: {last_error})" if last_error else "")
        )

    def _metadata_request(self, version: int) -> MetadataRequest:
        # v0 asks for every topic with an empty list, later versions with null.
        return MetadataRequest(topics=[] if version == 0 else None, allow_auto_topic_creation=False)

    async def _fetch_metadata(self) -> Any:
        failures: list[str] = []
        for broker in self._metadata_candidates():
            try:
                conn = await self.connection(broker.broker_id)
                return await conn.request(self._metadata_request(conn.api_version(ApiKey.METADATA)))
            except KafkaError as exc:
                failures.append(str(exc))
        for host, port in self.bootstrap_servers:
            try:
                async with connect(host, port, config=self.config) as conn:
                    return await conn.request(self._metadata_request(conn.api_version(ApiKey.METADATA)))
            except KafkaError as exc:
                failures.append(str(exc))
        raise NoBrokersAvailableError("no broker answered a Metadata request: " + "; ".join(failures))

    def _metadata_candidates(self) -> list[_Broker]:
        """Connected brokers, least busy first, then known brokers not backing off."""
        now = trio.current_time()
        connected = sorted((b for b in self._brokers.values() if b.connected), key=lambda b: b.in_flight)
        idle = [b for b in self._brokers.values() if not b.connected and b.retry_at <= now]
        random.shuffle(idle)
        return connected + idle

    def _apply_metadata(self, response: Any) -> None:
        metadata = ClusterMetadata.from_response(response)
        for info in metadata.brokers.values():
            self._register_broker(info.node_id, info.host, info.port)
        self.metadata = metadata
        self._metadata_updated.set()
        self._metadata_updated = trio.Event()

    def _register_broker(self, broker_id: int, host: str, port: int) -> None:
        broker = self._brokers.get(broker_id)
        if broker is None:
            self._brokers[broker_id] = _Broker(broker_id, host, port)
        elif (broker.host, broker.port) != (host, port):
            log.info("broker %d moved from %s to %s:%d", broker_id, broker.address, host, port)
            broker.host, broker.port = host, port
            broker.failures, broker.retry_at = 0, float("-inf")
            broker.close_all(f"was closed: the broker moved to {host}:{port}")

    async def _maintain_metadata(self) -> None:
        failures = 0
        while True:
            with trio.move_on_after(self.config.metadata_max_age):
                await self._refresh_wanted.wait()
            # At most one refresh per retry_backoff, however many errors asked for one.
            await trio.sleep_until(self._last_refresh_at + self.config.retry_backoff)
            self._refresh_wanted = trio.Event()
            try:
                await self.refresh_metadata()
                failures = 0
            except KafkaError as exc:
                failures += 1
                log.warning("metadata refresh failed: %s", exc)
                self._refresh_wanted.set()
                await trio.sleep(doubled(self.config.retry_backoff, failures, self.config.reconnect_backoff_max))

    # --- routing -------------------------------------------------------------------------------

    async def leader_for(self, topic: str, partition: int) -> int:
        """The id of the broker leading ``topic``-``partition``, refreshing the
        metadata once if it is unknown or leaderless. Raises
        UnknownTopicOrPartitionError or LeaderNotAvailableError (both retriable)."""
        leader = self.metadata.leader(topic, partition)
        if leader is not None:
            return leader
        metadata = await self.refresh_metadata()
        leader = metadata.leader(topic, partition)
        if leader is not None:
            return leader
        info = metadata.topics.get(topic)
        if info is None:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} is not in the cluster metadata", topic=topic, partition=partition
            )
        if partition not in info.partitions:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition} (it has {info.partition_count})",
                topic=topic,
                partition=partition,
            )
        raise LeaderNotAvailableError(
            f"{topic}-{partition} has no leader (replicas {list(info.partitions[partition].replicas)})",
            topic=topic,
            partition=partition,
        )

    async def leaders_for(self, partitions: Sequence[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """Partitions grouped by leader. Raises as :meth:`leader_for` does for the
        first partition without one."""
        grouped: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            grouped.setdefault(await self.leader_for(tp.topic, tp.partition), []).append(tp)
        return grouped

    # --- connections and requests ----------------------------------------------------------------

    def _broker(self, broker_id: int) -> _Broker:
        broker = self._brokers.get(broker_id)
        if broker is None:
            raise BrokerNotAvailableError(f"broker {broker_id} is not in the cluster metadata", broker=broker_id)
        return broker

    async def connection(self, broker_id: int, *, purpose: str = DEFAULT) -> BrokerConnection:
        """The pooled connection to a broker for ``purpose``, opened (after any
        reconnect backoff) if needed."""
        broker = self._broker(broker_id)
        link = broker.link(purpose)
        if link.conn is not None and not link.conn.closed:
            return link.conn
        async with link.lock:
            if link.conn is not None and not link.conn.closed:
                return link.conn
            await trio.sleep_until(broker.retry_at)
            try:
                conn: BrokerConnection = await self._tasks.start(self._run_connection, broker)
            except KafkaError:
                broker.failures += 1
                config = self.config
                delay = doubled(config.reconnect_backoff, broker.failures - 1, config.reconnect_backoff_max)
                broker.retry_at = trio.current_time() + jittered(delay, random.random())
                self.request_metadata_refresh()
                raise
            broker.failures = 0
            link.conn = conn
            return conn

    async def _run_connection(self, broker: _Broker, *, task_status: trio.TaskStatus[BrokerConnection]) -> None:
        async with connect(
            broker.host, broker.port, config=self.config, broker=broker.broker_id, buffers=self._buffers
        ) as conn:
            task_status.started(conn)
            await conn.wait_closed()
            if conn.closed_reason != "was closed by the client":
                log.info("connection to broker %d %s", broker.broker_id, conn.closed_reason)
                self.request_metadata_refresh()

    def connected_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self._brokers.values() if b.connected)

    async def api_versions(self, broker_id: int) -> BrokerApiVersions:
        """What a broker advertised (connecting to it if needed)."""
        return (await self.connection(broker_id)).versions

    async def send(
        self,
        broker_id: int,
        request: Declared,
        *,
        version: int | None = None,
        timeout: float | None = None,
        expect_response: bool = True,
        purpose: str = DEFAULT,
    ) -> Any:
        """Send a request to a broker and return its decoded response (see
        :meth:`BrokerConnection.request`), on the broker's connection for
        ``purpose``. Connection failures schedule a metadata refresh and raise
        KafkaConnectionError; nothing is retried."""
        try:
            conn = await self.connection(broker_id, purpose=purpose)
            return await conn.request(request, version=version, timeout=timeout, expect_response=expect_response)
        except KafkaError as exc:
            self.note_error(exc)
            raise

    def least_loaded_broker(self) -> int | None:
        """A connected broker with the fewest requests in flight, else any known
        broker not backing off, else None."""
        candidates = self._metadata_candidates()
        return candidates[0].broker_id if candidates else None

    async def send_to_any(self, request: Declared, *, timeout: float | None = None) -> Any:
        """Send to the least loaded broker, moving on to the next while brokers cannot be reached."""
        failures: list[str] = []
        candidates = self._metadata_candidates() or list(self._brokers.values())
        for broker in candidates:
            try:
                return await self.send(broker.broker_id, request, timeout=timeout)
            except KafkaConnectionError as exc:
                failures.append(str(exc))
        raise NoBrokersAvailableError(f"no broker could take a {type(request).__name__}: " + "; ".join(failures))

    async def send_to_controller(self, request: Declared, *, timeout: float | None = None) -> Any:
        """Send to the controller. A cluster may name none for a moment (a broker
        that just started, a controller election in progress): wait, refreshing
        the metadata, as Kafka's admin client does."""
        controller = self.metadata.controller_id
        if controller is None:
            metadata = await self.wait_for_metadata(lambda m: m.controller_id is not None, what="a controller")
            controller = metadata.controller_id
        if controller is None:
            raise BrokerNotAvailableError("the cluster metadata names no controller")
        return await self.send(controller, request, timeout=timeout)

    # --- coordinators --------------------------------------------------------------------------

    async def coordinator_for(
        self, key: str, *, key_type: int = GROUP_COORDINATOR, refresh: bool = False, timeout: float | None = None
    ) -> int:
        """The broker coordinating a consumer group (or, with ``key_type=1``, a
        transactional id), from FindCoordinator; cached until :meth:`forget_coordinator`
        or ``refresh=True``. Retries COORDINATOR_NOT_AVAILABLE and the like until
        ``timeout`` (default ``api_timeout``)."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None and not refresh:
            return cached
        timeout = self.config.api_timeout if timeout is None else timeout
        deadline = trio.current_time() + timeout
        what = "group" if key_type == GROUP_COORDINATOR else "transactional id"
        while True:
            response: FindCoordinatorResponse = await self.send_to_any(
                FindCoordinatorRequest(key=key, key_type=key_type)
            )
            if not response.error_code:
                self._register_broker(response.node_id, response.host, response.port)
                self._coordinators[(key_type, key)] = response.node_id
                return response.node_id
            error = error_for(
                response.error_code, detail=response.error_message, context=f"FindCoordinator for {what} {key!r}"
            )
            if not error.retriable or trio.current_time() + self.config.retry_backoff > deadline:
                raise error
            await trio.sleep(self.config.retry_backoff)

    def forget_coordinator(self, key: str, *, key_type: int = GROUP_COORDINATOR) -> None:
        """Drop a cached coordinator (after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE
        or a connection error), so the next lookup asks again."""
        self._coordinators.pop((key_type, key), None)

    async def send_to_coordinator(
        self, key: str, request: Declared, *, key_type: int = GROUP_COORDINATOR, timeout: float | None = None
    ) -> Any:
        """Send to the coordinator of ``key``, on the coordinator connection; a
        connection error forgets the coordinator."""
        coordinator = await self.coordinator_for(key, key_type=key_type)
        try:
            return await self.send(coordinator, request, timeout=timeout, purpose=COORDINATOR)
        except KafkaConnectionError:
            self.forget_coordinator(key, key_type=key_type)
            raise


__all__ = ["COORDINATOR", "DEFAULT", "GROUP_COORDINATOR", "TRANSACTION_COORDINATOR", "Cluster", "parse_bootstrap"]
