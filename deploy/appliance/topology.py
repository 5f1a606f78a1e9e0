"""The topology file: the whole appliance described once, in TOML.

    [datacenters.<name>]      hadoop = true marks the one that hosts Hadoop access (runs the loads)
    [clusters.<name>]         datacenter, zookeeper = {servers, chroot, data_dir}, topic_defaults,
                              listeners = {NAME = PROTOCOL, ...}, remote_listener, brokers = [...]
    [mirrors.<alias>]         source, target, topics, exclude, group, metrics_port, instances, host
    [loads.<name>]            cluster, output, schedule, master, topics, metrics_file
    [security]                sasl_mechanism, authorizer: how the appliance's own components log in
    [local]                   run_dir: where `tributary up` keeps data and logs by default

The same file drives `tributary up` (everything on one machine), `tributary status`
and the Ansible dynamic inventory, so they never disagree. `load_topology` checks
it completely and raises `TopologyError` naming the offending key and its line:
"mirror 'west' names unknown cluster 'wst' (line 41)". Relative paths resolve
against the file's directory; data directories left out go under the run directory.
docs/deploy.md is the reference for every key.

Listeners: a cluster without ``listeners`` has one, ``PLAINTEXT``, on each broker's ``port``, as
before security existed. The first listener is the *local* one (on ``port``): clients in the
cluster's own datacenter and the brokers' replication use it. ``remote_listener`` (by default the
first SASL_SSL listener, else the local one) is what clients in other datacenters use: the
mirrors' source side. Which link uses which listener is deploy/appliance/links.py's to say.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlparse

from tributary.broker.config import ConfigError
from tributary.broker.config import load as load_broker_config
from tributary.deploy.appliance.toml_lines import PathPart, find_line


class TopologyError(ValueError):
    """The topology is wrong; the message names what and where."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message if line is None else f"{message} (line {line})")
        self.line = line


@dataclass(frozen=True)
class Datacenter:
    name: str
    hadoop: bool = False


@dataclass(frozen=True)
class ZooKeeper:
    servers: tuple[str, ...]
    chroot: str
    data_dir: Path

    @property
    def connect(self) -> str:
        """kazoo's connect string: ``h1:p1,h2:p2/chroot``."""
        return ",".join(self.servers) + self.chroot


#: Kafka's security protocols (``listener.security.protocol.map`` values).
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms the appliance's own components can log in with (users get SCRAM
#: credentials either way: the brokers check PLAIN passwords against them).
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
#: Without a ``listeners`` table a cluster has this one, as before listeners could be named.
DEFAULT_LISTENER = "PLAINTEXT"


@dataclass(frozen=True)
class Listener:
    """A named listener of every broker of a cluster (Kafka's ``NAME://host:port``)."""

    name: str  # upper case, as Kafka compares listener names
    protocol: str  # one of PROTOCOLS

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        """Whether a client must log in (else it is User:ANONYMOUS)."""
        return self.protocol.startswith("SASL_")


@dataclass(frozen=True)
class Broker:
    id: int
    host: str
    port: int
    data_dir: Path
    metrics_port: int | None = None
    #: Listener name -> port, every listener of the cluster (the first one's is ``port``).
    ports: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def address(self) -> str:
        """Where the broker serves its cluster's local (first) listener."""
        return f"{self.host}:{self.port}"

    def address_on(self, listener: str) -> str:
        return f"{self.host}:{self.ports.get(listener, self.port)}"


@dataclass(frozen=True)
class Cluster:
    name: str
    datacenter: str
    zookeeper: ZooKeeper
    brokers: tuple[Broker, ...]
    topic_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    #: In order; the first is the local listener (each broker's ``port``).
    listeners: tuple[Listener, ...] = (Listener(DEFAULT_LISTENER, "PLAINTEXT"),)
    #: The listener clients in other datacenters use.
    remote_listener: str = DEFAULT_LISTENER

    @property
    def bootstrap(self) -> str:
        """The brokers on the local listener: what clients in the cluster's datacenter use."""
        return ",".join(b.address for b in self.brokers)

    def bootstrap_on(self, listener: str) -> str:
        return ",".join(b.address_on(listener) for b in self.brokers)

    @property
    def local_listener(self) -> Listener:
        return self.listeners[0]

    def listener(self, name: str) -> Listener:
        return next(listener for listener in self.listeners if listener.name == name)

    @property
    def authenticates(self) -> bool:
        """Whether any listener logs clients in (so the cluster has users, and maybe ACLs)."""
        return any(listener.sasl for listener in self.listeners)

    @property
    def tls(self) -> bool:
        """Whether any listener speaks TLS (so every broker needs a certificate)."""
        return any(listener.tls for listener in self.listeners)

    @property
    def zookeeper_connect(self) -> str:
        return self.zookeeper.connect


@dataclass(frozen=True)
class Mirror:
    alias: str
    source: str
    target: str
    topics: str = ".*"
    exclude: str = ""
    group: str = ""
    metrics_port: int | None = None
    instances: int = 1
    # Where the mirror runs: in the target's datacenter (consume remotely, produce locally).
    host: str = ""

    def metrics_ports(self) -> tuple[int, ...]:
        """One port per instance, counting up from metrics_port."""
        if self.metrics_port is None:
            return ()
        return tuple(self.metrics_port + i for i in range(self.instances))


@dataclass(frozen=True)
class Load:
    name: str
    cluster: str
    output: str
    schedule: str = "*-*-* 02:00:00"
    master: str = "local[*]"
    topics: str = ".*"
    metrics_file: Path = Path()
    summary_json: Path = Path()


@dataclass(frozen=True)
class Security:
    """How the appliance's own components (brokers, mirrors, loads, the operator's tools) log in
    on listeners that authenticate, and whether the brokers check ACLs."""

    sasl_mechanism: str = "SCRAM-SHA-512"
    #: Kafka's ACL authorizer on every cluster that authenticates (deploy/appliance/principals.py
    #: gives each component only what it needs).
    authorizer: bool = True


@dataclass(frozen=True)
class Topology:
    path: Path
    run_dir: Path
    datacenters: Mapping[str, Datacenter]
    clusters: Mapping[str, Cluster]
    mirrors: Mapping[str, Mirror]
    loads: Mapping[str, Load]
    security: Security = Security()

    @property
    def hadoop_datacenter(self) -> str | None:
        return next((dc.name for dc in self.datacenters.values() if dc.hadoop), None)

    def clusters_in(self, datacenter: str) -> list[Cluster]:
        return [c for c in self.clusters.values() if c.datacenter == datacenter]


# Names become directory names, chroot parts and (for mirror aliases) topic-name prefixes.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9_.:\[\]-]+):(?P<port>\d{1,5})$")
# Kafka's listener names: letters, digits and '_' (compared case-insensitively, shown upper case).
_LISTENER_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")


class _Checker:
    """Walks the parsed TOML, building dataclasses; every complaint carries its line."""

    def __init__(self, text: str, base: Path) -> None:
        self.text = text
        self.base = base

    def fail(self, message: str, path: Sequence[PathPart]) -> TopologyError:
        return TopologyError(message, find_line(self.text, path))

    def table(self, value: Any, what: str, path: Sequence[PathPart]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{what} must be a table", path)
        return value

    def keys(self, table: Mapping[str, Any], allowed: set[str], what: str, path: Sequence[PathPart]) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(f"{what} has unknown key '{key}' (known: {', '.join(sorted(allowed))})", [*path, key])

    def required(self, table: Mapping[str, Any], key: str, what: str, path: Sequence[PathPart]) -> Any:
        if key not in table:
            raise self.fail(f"{what} needs '{key}'", path)
        return table[key]

    def string(self, value: Any, what: str, path: Sequence[PathPart], *, empty: bool = False) -> str:
        if not isinstance(value, str) or (not value and not empty):
            raise self.fail(f"{what} must be a {'' if empty else 'non-empty '}string, got {value!r}", path)
        return value

    def integer(self, value: Any, what: str, path: Sequence[PathPart], low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(f"{what} must be an integer from {low} to {high}, got {value!r}", path)
        return value

    def port(self, value: Any, what: str, path: Sequence[PathPart]) -> int:
        return self.integer(value, what, path, 1, 65535)

    def name(self, name: str, what: str, path: Sequence[PathPart]) -> str:
        if not _NAME.match(name):
            raise self.fail(f"{what} name {name!r} must be 1-64 letters, digits, '_' or '-'", path)
        return name

    def regex(self, value: Any, what: str, path: Sequence[PathPart]) -> str:
        pattern = self.string(value, what, path, empty=True)
        try:
            re.compile(pattern)
        except re.error as exc:
            raise self.fail(f"{what} is not a valid regular expression: {exc}", path) from None
        return pattern

    def path(self, value: Any, what: str, path: Sequence[PathPart]) -> Path:
        given = Path(self.string(value, what, path)).expanduser()
        return given if given.is_absolute() else (self.base / given).resolve()


def _datacenters(c: _Checker, raw: Any) -> dict[str, Datacenter]:
    table = c.table(raw, "'datacenters'", ["datacenters"])
    if not table:
        raise c.fail("the topology needs at least one datacenter ([datacenters.<name>])", ["datacenters"])
    result: dict[str, Datacenter] = {}
    for name, entry in table.items():
        where = ["datacenters", name]
        what = f"datacenter '{name}'"
        c.name(name, "datacenter", where)
        body = c.table(entry, what, where)
        c.keys(body, {"hadoop"}, what, where)
        hadoop = body.get("hadoop", False)
        if not isinstance(hadoop, bool):
            raise c.fail(f"{what}: 'hadoop' must be true or false, got {hadoop!r}", [*where, "hadoop"])
        result[name] = Datacenter(name, hadoop)
    hadoop_dcs = [dc.name for dc in result.values() if dc.hadoop]
    if len(hadoop_dcs) > 1:
        raise c.fail(
            f"only one datacenter may host Hadoop access, got {', '.join(hadoop_dcs)}",
            ["datacenters", hadoop_dcs[1], "hadoop"],
        )
    return result


def _zookeeper(c: _Checker, raw: Any, cluster: str, datacenter: str, run_dir: Path) -> ZooKeeper:
    where: list[PathPart] = ["clusters", cluster, "zookeeper"]
    what = f"cluster '{cluster}': zookeeper"
    body = c.table(raw, what, where)
    c.keys(body, {"servers", "chroot", "data_dir"}, what, where)
    servers = c.required(body, "servers", what, where)
    if not isinstance(servers, list) or not servers:
        raise c.fail(f"{what}: 'servers' must be a non-empty list of \"HOST:PORT\"", [*where, "servers"])
    for server in servers:
        if not isinstance(server, str) or not _HOST_PORT.match(server) or not 0 < int(server.rsplit(":", 1)[1]) < 65536:
            raise c.fail(f"{what}: server {server!r} is not HOST:PORT", [*where, "servers"])
    chroot = c.string(body.get("chroot", ""), f"{what}: 'chroot'", [*where, "chroot"], empty=True)
    if chroot and (not chroot.startswith("/") or chroot.endswith("/") or "//" in chroot):
        raise c.fail(f"{what}: chroot {chroot!r} must look like /a/b (or be empty)", [*where, "chroot"])
    data_dir = (
        c.path(body["data_dir"], f"{what}: 'data_dir'", [*where, "data_dir"])
        if "data_dir" in body
        else run_dir / "zookeeper" / datacenter
    )
    return ZooKeeper(tuple(servers), chroot, data_dir)


def _topic_defaults(c: _Checker, raw: Any, cluster: str) -> Mapping[str, Any]:
    where: list[PathPart] = ["clusters", cluster, "topic_defaults"]
    body = c.table(raw, f"cluster '{cluster}': topic_defaults", where)
    # The brokers get these as settings: let the broker's own checker judge them now,
    # rather than have every broker refuse to start later.
    try:
        load_broker_config({"id": 0, "listen": "127.0.0.1:1", "data-dir": "/nonexistent", "zookeeper": "z:1", **body})
    except ConfigError as exc:
        key = next((k for k in body if f"'{k}'" in str(exc)), None)
        raise c.fail(f"cluster '{cluster}': topic_defaults: {exc}", [*where, key] if key else where) from None
    return MappingProxyType(dict(body))


def _listeners(c: _Checker, body: Mapping[str, Any], cluster: str) -> tuple[tuple[Listener, ...], str]:
    """The cluster's listeners, in order, and the name of its remote listener."""
    where: list[PathPart] = ["clusters", cluster, "listeners"]
    what = f"cluster '{cluster}': listeners"
    raw = body.get("listeners", {DEFAULT_LISTENER: "PLAINTEXT"})
    table = c.table(raw, what, where)
    if not table:
        raise c.fail(f'{what} must name at least one listener (NAME = "PROTOCOL")', where)
    listeners: list[Listener] = []
    for name, protocol in table.items():
        if not _LISTENER_NAME.match(name):
            raise c.fail(f"{what}: listener name {name!r} must be letters, digits and '_'", [*where, name])
        if name.upper() in (listener.name for listener in listeners):
            raise c.fail(f"{what}: listener {name.upper()} is named twice (names are case-insensitive)", [*where, name])
        if protocol not in PROTOCOLS:
            raise c.fail(f"{what}: {name}'s protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}",
                         [*where, name])  # fmt: skip
        listeners.append(Listener(name.upper(), protocol))
    default_remote = next(
        (listener.name for listener in listeners if listener.protocol == "SASL_SSL"), listeners[0].name
    )
    remote = c.string(body.get("remote_listener", default_remote), f"cluster '{cluster}': 'remote_listener'",
                      ["clusters", cluster, "remote_listener"]).upper()  # fmt: skip
    if remote not in (listener.name for listener in listeners):
        raise c.fail(f"cluster '{cluster}': 'remote_listener' names unknown listener {remote}",
                     ["clusters", cluster, "remote_listener"])  # fmt: skip
    return tuple(listeners), remote


def _broker_ports(
    c: _Checker, body: Mapping[str, Any], listeners: Sequence[Listener], port: int, *, what: str, at: list[PathPart]
) -> Mapping[str, int]:
    """Every listener's port: the first listener's is ``port``, the others' are in ``ports``."""
    raw = c.table(body.get("ports", {}), f"{what}: 'ports'", [*at, "ports"])
    given = {name.upper(): value for name, value in raw.items()}
    ports = {listeners[0].name: port}
    for name, value in raw.items():
        if name.upper() == listeners[0].name:
            raise c.fail(f"{what}: listener {listeners[0].name} is the first one: its port is 'port', not 'ports'",
                         [*at, "ports", name])  # fmt: skip
        if name.upper() not in (listener.name for listener in listeners):
            raise c.fail(f"{what}: 'ports' names unknown listener {name.upper()}", [*at, "ports", name])
        ports[name.upper()] = c.port(value, f"{what}: port of listener {name.upper()}", [*at, "ports", name])
    for listener in listeners[1:]:
        if listener.name not in given:
            raise c.fail(f"{what} needs a port for listener {listener.name} in 'ports'", at)
    return MappingProxyType(ports)


def _brokers(c: _Checker, raw: Any, cluster: str, run_dir: Path, listeners: Sequence[Listener]) -> tuple[Broker, ...]:
    where: list[PathPart] = ["clusters", cluster, "brokers"]
    if not isinstance(raw, list) or not raw:
        raise c.fail(f"cluster '{cluster}' needs a non-empty list 'brokers'", where)
    brokers: list[Broker] = []
    seen_ids: set[int] = set()
    for index, entry in enumerate(raw):
        at: list[PathPart] = [*where, index]
        what = f"cluster '{cluster}': broker #{index + 1}"
        body = c.table(entry, what, at)
        c.keys(body, {"id", "host", "port", "ports", "data_dir", "metrics_port"}, what, at)
        broker_id = c.integer(c.required(body, "id", what, at), f"{what}: 'id'", [*at, "id"], 0, 2**31 - 1)
        if broker_id in seen_ids:
            raise c.fail(f"cluster '{cluster}' has two brokers with id {broker_id}", [*at, "id"])
        seen_ids.add(broker_id)
        what = f"cluster '{cluster}': broker {broker_id}"
        host = c.string(c.required(body, "host", what, at), f"{what}: 'host'", [*at, "host"])
        port = c.port(c.required(body, "port", what, at), f"{what}: 'port'", [*at, "port"])
        data_dir = (
            c.path(body["data_dir"], f"{what}: 'data_dir'", [*at, "data_dir"])
            if "data_dir" in body
            else run_dir / cluster / f"broker-{broker_id}"
        )
        metrics_port = (
            c.port(body["metrics_port"], f"{what}: 'metrics_port'", [*at, "metrics_port"])
            if "metrics_port" in body
            else None
        )
        ports = _broker_ports(c, body, listeners, port, what=what, at=at)
        brokers.append(Broker(broker_id, host, port, data_dir, metrics_port, ports))
    return tuple(brokers)


def _clusters(c: _Checker, raw: Any, datacenters: Mapping[str, Datacenter], run_dir: Path) -> dict[str, Cluster]:
    table = c.table(raw, "'clusters'", ["clusters"])
    if not table:
        raise c.fail("the topology needs at least one cluster ([clusters.<name>])", ["clusters"])
    result: dict[str, Cluster] = {}
    for name, entry in table.items():
        where: list[PathPart] = ["clusters", name]
        what = f"cluster '{name}'"
        c.name(name, "cluster", where)
        body = c.table(entry, what, where)
        allowed = {"datacenter", "zookeeper", "topic_defaults", "listeners", "remote_listener", "brokers"}
        c.keys(body, allowed, what, where)
        dc = c.string(c.required(body, "datacenter", what, where), f"{what}: 'datacenter'", [*where, "datacenter"])
        if dc not in datacenters:
            raise c.fail(f"{what} names unknown datacenter '{dc}'", [*where, "datacenter"])
        zookeeper = _zookeeper(c, c.required(body, "zookeeper", what, where), name, dc, run_dir)
        defaults = _topic_defaults(c, body.get("topic_defaults", {}), name)
        listeners, remote = _listeners(c, body, name)
        brokers = _brokers(c, c.required(body, "brokers", what, where), name, run_dir, listeners)
        result[name] = Cluster(name, dc, zookeeper, brokers, defaults, listeners, remote)
    return result


def _mirrors(c: _Checker, raw: Any, clusters: Mapping[str, Cluster]) -> dict[str, Mirror]:
    table = c.table(raw, "'mirrors'", ["mirrors"])
    result: dict[str, Mirror] = {}
    for alias, entry in table.items():
        where: list[PathPart] = ["mirrors", alias]
        what = f"mirror '{alias}'"
        # The alias prefixes aggregate topic names (<alias>.<topic>): no dots in it.
        c.name(alias, "mirror alias", where)
        body = c.table(entry, what, where)
        allowed = {"source", "target", "topics", "exclude", "group", "metrics_port", "instances", "host"}
        c.keys(body, allowed, what, where)
        ends: dict[str, str] = {}
        for end in ("source", "target"):
            cluster = c.string(c.required(body, end, what, where), f"{what}: '{end}'", [*where, end])
            if cluster not in clusters:
                raise c.fail(f"{what} names unknown cluster '{cluster}'", [*where, end])
            ends[end] = cluster
        if ends["source"] == ends["target"]:
            raise c.fail(f"{what} has the same cluster '{ends['source']}' as source and target", [*where, "target"])
        instances = c.integer(body.get("instances", 1), f"{what}: 'instances'", [*where, "instances"], 1, 64)
        metrics_port = (
            c.port(body["metrics_port"], f"{what}: 'metrics_port'", [*where, "metrics_port"])
            if "metrics_port" in body
            else None
        )
        if metrics_port is not None and metrics_port + instances - 1 > 65535:
            raise c.fail(f"{what}: metrics ports {metrics_port}+{instances} run past 65535", [*where, "metrics_port"])
        target = clusters[ends["target"]]
        host = c.string(body.get("host", target.brokers[0].host), f"{what}: 'host'", [*where, "host"])
        result[alias] = Mirror(
            alias=alias,
            source=ends["source"],
            target=ends["target"],
            topics=c.regex(body.get("topics", ".*"), f"{what}: 'topics'", [*where, "topics"]),
            exclude=c.regex(body.get("exclude", ""), f"{what}: 'exclude'", [*where, "exclude"]),
            group=c.string(body.get("group", f"tributary-mirror-{alias}"), f"{what}: 'group'", [*where, "group"]),
            metrics_port=metrics_port,
            instances=instances,
            host=host,
        )
    return result


def _output_uri(c: _Checker, value: Any, what: str, path: Sequence[PathPart]) -> str:
    """A Hadoop FileSystem URI; a plain path is a local directory, relative to the file."""
    text = c.string(value, what, path)
    scheme = urlparse(text).scheme
    if not scheme:
        return c.path(text, what, path).as_uri()
    if scheme == "file" and not text.startswith("file:///"):
        raise c.fail(f"{what}: {text!r} must be file:///absolute/path (or a plain relative path)", path)
    if scheme not in ("file", "hdfs", "viewfs", "s3a", "abfs", "abfss", "gs", "webhdfs"):
        raise c.fail(f"{what}: {text!r} is not a Hadoop FileSystem URI (file://, hdfs://, ...)", path)
    return text


def _loads(c: _Checker, raw: Any, clusters: Mapping[str, Cluster], run_dir: Path) -> dict[str, Load]:
    table = c.table(raw, "'loads'", ["loads"])
    result: dict[str, Load] = {}
    for name, entry in table.items():
        where: list[PathPart] = ["loads", name]
        what = f"load '{name}'"
        c.name(name, "load", where)
        body = c.table(entry, what, where)
        c.keys(body, {"cluster", "output", "schedule", "master", "topics", "metrics_file", "summary_json"}, what, where)
        cluster = c.string(c.required(body, "cluster", what, where), f"{what}: 'cluster'", [*where, "cluster"])
        if cluster not in clusters:
            raise c.fail(f"{what} names unknown cluster '{cluster}'", [*where, "cluster"])
        output = _output_uri(c, c.required(body, "output", what, where), f"{what}: 'output'", [*where, "output"])
        schedule = c.string(body.get("schedule", "*-*-* 02:00:00"), f"{what}: 'schedule'", [*where, "schedule"])
        master = c.string(body.get("master", "local[*]"), f"{what}: 'master'", [*where, "master"])
        topics = c.regex(body.get("topics", ".*"), f"{what}: 'topics'", [*where, "topics"])
        metrics_file = (
            c.path(body["metrics_file"], f"{what}: 'metrics_file'", [*where, "metrics_file"])
            if "metrics_file" in body
            else run_dir / "loads" / f"{name}.prom"
        )
        summary_json = (
            c.path(body["summary_json"], f"{what}: 'summary_json'", [*where, "summary_json"])
            if "summary_json" in body
            else run_dir / "loads" / f"{name}.json"
        )
        result[name] = Load(name, cluster, output, schedule, master, topics, metrics_file, summary_json)
    return result


def _check_addresses(c: _Checker, clusters: Mapping[str, Cluster], mirrors: Mapping[str, Mirror]) -> None:
    """No two things may listen on the same host and port."""
    owners: dict[tuple[str, int], str] = {}

    def claim(host: str, port: int, owner: str, path: Sequence[PathPart]) -> None:
        other = owners.setdefault((host, port), owner)
        if other != owner:
            raise c.fail(f"{owner} and {other} both listen on {host}:{port}", path)

    for cluster in clusters.values():
        for server in cluster.zookeeper.servers:
            host, _, port = server.rpartition(":")
            # Clusters of one datacenter may share an ensemble: same servers, same owner.
            claim(host, int(port), f"zookeeper {server}", ["clusters", cluster.name, "zookeeper", "servers"])
        for index, broker in enumerate(cluster.brokers):
            at: list[PathPart] = ["clusters", cluster.name, "brokers", index]
            claim(broker.host, broker.port, f"cluster '{cluster.name}' broker {broker.id}", [*at, "port"])
            for listener, listener_port in broker.ports.items():
                if listener != cluster.local_listener.name:
                    owner = f"cluster '{cluster.name}' broker {broker.id} listener {listener}"
                    claim(broker.host, listener_port, owner, [*at, "ports", listener])
            if broker.metrics_port is not None:
                owner = f"cluster '{cluster.name}' broker {broker.id} metrics"
                claim(broker.host, broker.metrics_port, owner, [*at, "metrics_port"])
    for mirror in mirrors.values():
        for i, metrics_port in enumerate(mirror.metrics_ports()):
            claim(
                mirror.host,
                metrics_port,
                f"mirror '{mirror.alias}' instance {i + 1} metrics",
                ["mirrors", mirror.alias, "metrics_port"],
            )


def _security(c: _Checker, raw: Any) -> Security:
    body = c.table(raw, "'security'", ["security"])
    c.keys(body, {"sasl_mechanism", "authorizer"}, "'security'", ["security"])
    mechanism = body.get("sasl_mechanism", Security.sasl_mechanism)
    if mechanism not in SASL_MECHANISMS:
        raise c.fail(f"'security': 'sasl_mechanism' must be one of {', '.join(SASL_MECHANISMS)}, got {mechanism!r}",
                     ["security", "sasl_mechanism"])  # fmt: skip
    authorizer = body.get("authorizer", Security.authorizer)
    if not isinstance(authorizer, bool):
        raise c.fail(f"'security': 'authorizer' must be true or false, got {authorizer!r}", ["security", "authorizer"])
    return Security(mechanism, authorizer)


def parse_topology(text: str, path: Path, run_dir: Path | None = None) -> Topology:
    """Check ``text`` (the contents of ``path``) and build the Topology.

    ``run_dir`` overrides the file's ``[local] run_dir``; data directories the file leaves
    out are placed under it.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"not valid TOML: {exc}") from None
    base = path.resolve().parent
    c = _Checker(text, base)
    c.keys(raw, {"datacenters", "clusters", "mirrors", "loads", "security", "local"}, "the topology", [])
    local = c.table(raw.get("local", {}), "'local'", ["local"])
    c.keys(local, {"run_dir"}, "'local'", ["local"])
    if run_dir is None:
        run_dir = (
            c.path(local["run_dir"], "'local': 'run_dir'", ["local", "run_dir"])
            if "run_dir" in local
            else (base / "run" / path.stem)
        )
    run_dir = run_dir.resolve()
    datacenters = _datacenters(c, c.required(raw, "datacenters", "the topology", []))
    clusters = _clusters(c, c.required(raw, "clusters", "the topology", []), datacenters, run_dir)
    mirrors = _mirrors(c, raw.get("mirrors", {}), clusters)
    loads = _loads(c, raw.get("loads", {}), clusters, run_dir)
    _check_addresses(c, clusters, mirrors)
    security = _security(c, raw.get("security", {}))
    return Topology(
        path=path.resolve(),
        run_dir=run_dir,
        datacenters=MappingProxyType(datacenters),
        clusters=MappingProxyType(clusters),
        mirrors=MappingProxyType(mirrors),
        loads=MappingProxyType(loads),
        security=security,
    )


def load_topology(path: Path | str, run_dir: Path | None = None) -> Topology:
    """Read and check the topology file at ``path``; raises TopologyError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(f"topology file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"cannot read topology file {path}: {exc}") from None
    return parse_topology(text, path, run_dir)
