"""What is up in a topology, asked of the components themselves (no state of `tributary up` needed).

- ZooKeeper servers: ``ruok``.
- Brokers: Metadata from each, on the cluster's local listener (logged in as the admin user
  when that listener authenticates: security_files.tool_security); the cluster's topics,
  partitions and records (end minus start offsets, from ListOffsets) from whichever broker
  answers, and which partitions are under-replicated (ISR smaller than the replicas) or offline
  (no live leader: counts as down).
- Mirrors: their Prometheus endpoints (lag in records and seconds, records copied, links).
- Loads: the loader's metrics file (node_exporter textfile format) named by the topology.

Everything has a short timeout; what does not answer is reported down with the reason.
Used by `tributary status` and by `tributary demo`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import trio

from tributary.client.admin.admin import Admin
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError
from tributary.client.security.settings import PLAINTEXT, SecurityConfig, SecuritySettingsError
from tributary.client.wire.cluster import Cluster as ClientCluster
from tributary.client.wire.metadata import TopicPartition
from tributary.deploy.appliance.probe import (
    ProbeError,
    Sample,
    broker_metadata,
    maximum,
    parse_samples,
    scrape,
    split_address,
    total,
)
from tributary.deploy.appliance.probe import zookeeper_ok as probe_zookeeper
from tributary.deploy.appliance.security_files import tool_security
from tributary.deploy.appliance.topology import Cluster, Load, Mirror, Topology


@dataclass
class Endpoint:
    name: str
    address: str
    up: bool = False
    error: str = ""


@dataclass
class TopicStatus:
    name: str
    partitions: int
    records: int | None  # sum over partitions of end - start offsets; None if unknown
    #: Partitions whose ISR is smaller than their replica set, and those without a live leader.
    under_replicated: list[int] = field(default_factory=list)
    offline: list[int] = field(default_factory=list)


@dataclass
class ClusterStatus:
    name: str
    datacenter: str
    zookeeper: list[Endpoint] = field(default_factory=list)
    brokers: list[Endpoint] = field(default_factory=list)
    controller: int | None = None
    topics: list[TopicStatus] = field(default_factory=list)
    error: str = ""

    @property
    def up(self) -> bool:
        # An offline partition (no live in-sync replica) is down too; under-replicated is not.
        return (
            all(e.up for e in self.zookeeper + self.brokers)
            and self.controller is not None
            and not any(t.offline for t in self.topics)
        )


@dataclass
class MirrorStatus:
    alias: str
    source: str
    target: str
    instances: list[Endpoint] = field(default_factory=list)
    lag_records: float | None = None
    lag_seconds: float | None = None
    copied_records: float | None = None
    copied_bytes: float | None = None
    seconds_since_last_copy: float | None = None
    assigned_partitions: float | None = None
    links_up: bool | None = None

    @property
    def up(self) -> bool:
        return bool(self.instances) and all(e.up for e in self.instances)


@dataclass
class LoadStatus:
    name: str
    cluster: str
    output: str
    metrics_file: str
    ran: bool = False
    last_run: float | None = None  # unix time
    success: bool | None = None
    duration_seconds: float | None = None
    records: float | None = None
    bytes: float | None = None
    gaps: float | None = None
    by_topic: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


@dataclass
class Status:
    topology: str
    clusters: list[ClusterStatus]
    mirrors: list[MirrorStatus]
    loads: list[LoadStatus]
    checked_at: float = field(default_factory=time.time)

    @property
    def all_up(self) -> bool:
        return all(c.up for c in self.clusters) and all(m.up for m in self.mirrors if m.instances)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["all_up"] = self.all_up
        for cluster, raw in zip(self.clusters, data["clusters"], strict=True):
            raw["up"] = cluster.up
        for mirror, raw in zip(self.mirrors, data["mirrors"], strict=True):
            raw["up"] = mirror.up
        return data


async def _check_endpoint(endpoint: Endpoint, check: Any) -> None:
    try:
        await check(*split_address(endpoint.address))
    except ProbeError as exc:
        endpoint.error = str(exc)
    else:
        endpoint.up = True


async def topic_records(
    bootstrap: str, timeout: float = 5.0, *, internal: bool = False, security: SecurityConfig = PLAINTEXT
) -> list[TopicStatus]:
    """Topics of a cluster with partition counts and records held (end minus start offsets)."""
    config = ClientConfig(
        connect_timeout=timeout, request_timeout=timeout, api_timeout=timeout, client_id="tributary", security=security
    )
    with trio.fail_after(timeout * 3):
        async with ClientCluster(bootstrap, config) as client:
            admin = Admin(client)
            topics = await admin.list_topics(internal=internal)
            partitions = [TopicPartition(name, p) for name, info in topics.items() for p in info.partitions]
            if not partitions:
                return []
            ends = await admin.latest_offsets(partitions)
            starts = await admin.earliest_offsets(partitions)
    return [
        TopicStatus(
            name,
            info.partition_count,
            sum(ends[TopicPartition(name, p)] - starts[TopicPartition(name, p)] for p in info.partitions),
            under_replicated=sorted(p for p, s in info.partitions.items() if len(s.isr) < len(s.replicas)),
            offline=sorted(p for p, s in info.partitions.items() if s.leader < 0),
        )
        for name, info in sorted(topics.items())
    ]


async def cluster_status(cluster: Cluster, timeout: float, security: SecurityConfig = PLAINTEXT) -> ClusterStatus:
    """Asked on the cluster's local listener, with ``security``'s TLS and login."""
    status = ClusterStatus(cluster.name, cluster.datacenter)
    status.zookeeper = [Endpoint(f"zookeeper {s}", s) for s in cluster.zookeeper.servers]
    status.brokers = [Endpoint(f"broker {b.id}", b.address) for b in cluster.brokers]
    controllers: list[int] = []

    async def check_broker(host: str, port: int) -> None:
        metadata = await broker_metadata(host, port, timeout, security=security)
        if metadata.controller_id is not None and metadata.controller_id >= 0:
            controllers.append(metadata.controller_id)

    async def check_zookeeper(host: str, port: int) -> None:
        await probe_zookeeper(host, port, timeout)

    async with trio.open_nursery() as nursery:
        for endpoint in status.zookeeper:
            nursery.start_soon(_check_endpoint, endpoint, check_zookeeper)
        for endpoint in status.brokers:
            nursery.start_soon(_check_endpoint, endpoint, check_broker)
    status.controller = controllers[0] if controllers else None
    if any(b.up for b in status.brokers):
        try:
            status.topics = await topic_records(
                ",".join(b.address for b in status.brokers if b.up), timeout, internal=False, security=security
            )
        except (KafkaError, OSError, trio.TooSlowError) as exc:
            status.error = f"topics: {exc or type(exc).__name__}"
    return status


def mirror_numbers(status: MirrorStatus, samples: list[Sample]) -> None:
    """Fold one instance's samples into the mirror's totals (sums over instances)."""

    def add(current: float | None, value: float | None) -> float | None:
        if value is None:
            return current
        return value if current is None else current + value

    status.lag_records = add(status.lag_records, total(samples, "tributary_mirror_lag_records"))
    lag_seconds = maximum(samples, "tributary_mirror_lag_seconds")
    if lag_seconds is not None:
        status.lag_seconds = max(status.lag_seconds or 0.0, lag_seconds)
    status.copied_records = add(status.copied_records, total(samples, "tributary_mirror_copied_records_total"))
    status.copied_bytes = add(status.copied_bytes, total(samples, "tributary_mirror_copied_bytes_total"))
    since = maximum(samples, "tributary_mirror_seconds_since_last_copy")
    if since is not None:
        status.seconds_since_last_copy = max(status.seconds_since_last_copy or 0.0, since)
    status.assigned_partitions = add(status.assigned_partitions, total(samples, "tributary_mirror_assigned_partitions"))
    links = [s.value for s in samples if s.name == "tributary_mirror_link_up"]
    if links:
        status.links_up = (status.links_up is not False) and all(v == 1 for v in links)


async def mirror_status(mirror: Mirror, timeout: float) -> MirrorStatus:
    status = MirrorStatus(mirror.alias, mirror.source, mirror.target)
    status.instances = [
        Endpoint(f"instance {i}", f"{mirror.host}:{port}") for i, port in enumerate(mirror.metrics_ports(), start=1)
    ]
    for endpoint in status.instances:
        try:
            samples = await scrape(*split_address(endpoint.address), timeout=timeout)
        except ProbeError as exc:
            endpoint.error = str(exc)
            continue
        endpoint.up = True
        mirror_numbers(status, samples)
    if any(e.up for e in status.instances):
        # Up with nothing assigned yet (no topics, or a rebalance under way): nothing lags.
        for name in ("lag_records", "lag_seconds", "copied_records", "copied_bytes", "assigned_partitions"):
            if getattr(status, name) is None:
                setattr(status, name, 0.0)
    return status


def load_status(load: Load) -> LoadStatus:
    status = LoadStatus(load.name, load.cluster, load.output, str(load.metrics_file))
    try:
        text = load.metrics_file.read_text()
    except FileNotFoundError:
        status.error = "no run recorded yet"
        return status
    except OSError as exc:
        status.error = f"cannot read {load.metrics_file}: {exc.strerror}"
        return status
    try:
        samples = parse_samples(text)
    except ProbeError as exc:
        status.error = f"{load.metrics_file}: {exc}"
        return status
    status.ran = True
    status.last_run = total(samples, "tributary_loader_last_run_timestamp_seconds")
    success = total(samples, "tributary_loader_last_run_success")
    status.success = None if success is None else success == 1
    status.duration_seconds = total(samples, "tributary_loader_last_run_duration_seconds")
    status.records = total(samples, "tributary_loader_last_run_records")
    status.bytes = total(samples, "tributary_loader_last_run_bytes")
    status.gaps = total(samples, "tributary_loader_last_run_gaps")
    bytes_by = {
        (s.labels.get("topic", ""), s.labels.get("source_datacenter", "")): s.value
        for s in samples
        if s.name == "tributary_loader_last_run_bytes"
    }
    status.by_topic = [
        {
            "topic": s.labels.get("topic", ""),
            "source_datacenter": s.labels.get("source_datacenter", ""),
            "records": int(s.value),
            "bytes": int(bytes_by.get((s.labels.get("topic", ""), s.labels.get("source_datacenter", "")), 0)),
        }
        for s in samples
        if s.name == "tributary_loader_last_run_records"
    ]
    return status


async def collect(topology: Topology, timeout: float = 3.0) -> Status:
    clusters: dict[str, ClusterStatus] = {}
    mirrors: dict[str, MirrorStatus] = {}

    async def one_cluster(cluster: Cluster) -> None:
        try:
            security = tool_security(topology, cluster)
        except SecuritySettingsError as exc:
            # The local listener logs clients in and this run directory has no admin password
            # (an appliance `tributary up` did not start): say so rather than probe in vain.
            status = ClusterStatus(cluster.name, cluster.datacenter, error=f"cannot log in as admin: {exc}")
            status.brokers = [Endpoint(f"broker {b.id}", b.address, error=status.error) for b in cluster.brokers]
            clusters[cluster.name] = status
            return
        clusters[cluster.name] = await cluster_status(cluster, timeout, security)

    async def one_mirror(mirror: Mirror) -> None:
        mirrors[mirror.alias] = await mirror_status(mirror, timeout)

    async with trio.open_nursery() as nursery:
        for cluster in topology.clusters.values():
            nursery.start_soon(one_cluster, cluster)
        for mirror in topology.mirrors.values():
            nursery.start_soon(one_mirror, mirror)
    return Status(
        topology=str(topology.path),
        clusters=[clusters[name] for name in topology.clusters],
        mirrors=[mirrors[alias] for alias in topology.mirrors],
        loads=[load_status(load) for load in topology.loads.values()],
    )
