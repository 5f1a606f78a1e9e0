"""Brokers as child processes (``python -m tributary.deploy.cli broker``), one or a cluster.

Each broker gets a free port, a data directory and a log file under the given root, and a
TOML config file of the extra settings (with ``listeners``, name -> security protocol, a free
port per listener, one of them PLAINTEXT for the kit's own readiness checks); a cluster's
brokers share one ZooKeeper connection string (give each cluster a chroot of its own:
:func:`tributary.testing.zookeeper.new_chroot`).
:class:`Cluster` is a context manager that starts every broker, waits until each answers
Metadata with the whole cluster and a controller, and stops them (SIGTERM) on the way out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from kazoo.client import KazooClient

from tributary.protocol.messages import MetadataRequest
from tributary.testing.ports import free_port, free_ports
from tributary.testing.processes import ListeningProcess
from tributary.testing.wire import request

#: How long a broker may take to answer Metadata after its start.
START_TIMEOUT = 30.0
#: The ZooKeeper session of the kit's brokers unless ``zookeeper.session.timeout.ms`` is given.
DEFAULT_SESSION_TIMEOUT_MS = 4_000
#: Metadata v8: the newest every broker this kit starts answers, leader epochs included.
METADATA_VERSION = 8


class BrokerProcess(ListeningProcess):
    def __init__(
        self,
        broker_id: int,
        zookeeper: str,
        data_dir: Path,
        log_path: Path,
        extra: dict[str, str] | None = None,
        *,
        port: int | None = None,
        metrics_port: int | None = None,
        advertise: str | None = None,
        listeners: Mapping[str, str] | None = None,
        listener_ports: Mapping[str, int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zookeeper = zookeeper
        self.data_dir = data_dir
        self.log_path = log_path
        #: Named listeners (name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL) and their ports;
        #: empty: the one PLAINTEXT listener of --listen.
        self.listeners = dict(listeners or {})
        self.listener_ports: dict[str, int] = {}
        if self.listeners:
            if advertise is not None:
                raise ValueError("advertise is for the one --listen listener; name listeners instead")
            given = dict(listener_ports or {})
            chosen = iter(free_ports(len(self.listeners) - len(given)))
            self.listener_ports = {name: given[name] if name in given else next(chosen) for name in self.listeners}
            plaintext = [name for name, protocol in self.listeners.items() if protocol == "PLAINTEXT"]
            if not plaintext:
                raise ValueError("the kit checks readiness over a PLAINTEXT listener: name one")
            port = self.listener_ports[plaintext[0]]
        self.port = free_port() if port is None else port
        #: Written to the broker's TOML config file as given (values are TOML: quote strings).
        self.extra = extra or {}
        # Given: the broker serves Prometheus metrics there (--metrics-port).
        self.metrics_port = metrics_port
        # Given: the HOST:PORT clients are told to use (--advertise), e.g. a proxy in front.
        self.advertise = advertise
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        config = self.data_dir.parent / f"broker-{self.broker_id}.toml"
        # A short session unless the test asks otherwise: a broker killed with -9 is then gone,
        # and its partitions led elsewhere, within seconds (Kafka's default is 18 s).
        settings = {"zookeeper.session.timeout.ms": str(DEFAULT_SESSION_TIMEOUT_MS), **self.extra}
        if self.listeners:
            settings["listeners"] = json.dumps(
                ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.listener_ports.items())
            )
            settings["listener.security.protocol.map"] = json.dumps(
                ",".join(f"{name}:{protocol}" for name, protocol in self.listeners.items())
            )
        # Keys quoted: Kafka's names as single TOML keys (ssl.keystore.location beside ssl.keystore.type).
        config.write_text("".join(f"{json.dumps(k)} = {v}\n" for k, v in settings.items()))
        cmd = [
            sys.executable, "-m", "tributary.deploy.cli", "broker",
            "--id", str(self.broker_id),
            "--data-dir", str(self.data_dir),
            "--zookeeper", self.zookeeper,
            "--config", str(config),
        ]  # fmt: skip
        if not self.listeners:
            cmd += ["--listen", self.bootstrap]
        if self.metrics_port is not None:
            cmd += ["--metrics-port", str(self.metrics_port)]
        if self.advertise is not None:
            cmd += ["--advertise", self.advertise]
        # Unbuffered, so the log file shows what the broker said up to the moment it was killed.
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

    def listener_address(self, name: str) -> tuple[str, int]:
        return ("127.0.0.1", self.listener_ports[name])

    def listener_bootstrap(self, name: str) -> str:
        """``host:port`` of the named listener (``bootstrap`` is the PLAINTEXT one)."""
        return f"127.0.0.1:{self.listener_ports[name]}"

    def wait_ready(self, expected_brokers: int = 1) -> None:
        """Until the broker answers Metadata listing ``expected_brokers`` brokers and a controller."""
        deadline = time.monotonic() + START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker {self.broker_id} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                response = request(self.address, MetadataRequest(topics=[]), 1, timeout=2)
                # Listening, registered, and a controller elected: admin clients can act.
                if len(response.brokers) >= expected_brokers and response.controller_id >= 0:
                    return
            except OSError as exc:
                last = exc
            time.sleep(0.05)
        raise TimeoutError(f"broker {self.broker_id} not ready: {last}\n{self.log_tail()}")

    def wait_deregistered(self, timeout: float = START_TIMEOUT) -> None:
        """Until the broker's registration in ZooKeeper is gone. After a kill -9 it lasts until
        its session expires (``zookeeper.session.timeout.ms``), and a broker started with the
        same id meanwhile is refused, as in Kafka."""
        client = KazooClient(hosts=self.zookeeper, timeout=5.0)
        client.start(timeout=10)
        try:
            deadline = time.monotonic() + timeout
            while client.exists(f"/brokers/ids/{self.broker_id}") is not None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {self.broker_id} is still registered after {timeout} s")
                time.sleep(0.05)
        finally:
            client.stop()
            client.close()


class Cluster:
    """``size`` brokers with ids 1..size on one ZooKeeper connection string (chroot included).

    ``extra``: broker settings (TOML values) for every broker; ``metrics``: each broker also
    serves Prometheus metrics on a port of its own (``BrokerProcess.metrics_port``);
    ``listeners``: named listeners for every broker (``{"PLAINTEXT": "PLAINTEXT", "SECURE":
    "SASL_SSL"}``), each on a port of its own (``bootstrap_for("SECURE")``)."""

    def __init__(
        self,
        zookeeper: str,
        root: Path,
        size: int,
        extra: dict[str, str] | None = None,
        *,
        metrics: bool = False,
        listeners: Mapping[str, str] | None = None,
    ) -> None:
        per_broker = max(1, len(listeners or {}))
        ports = free_ports(size * per_broker + (size if metrics else 0))
        metrics_ports: list[int | None] = list(ports[size * per_broker :]) if metrics else [None] * size
        self.brokers = []
        for index, metrics_port in enumerate(metrics_ports):
            own = ports[index * per_broker : (index + 1) * per_broker]
            i = index + 1
            self.brokers.append(
                BrokerProcess(
                    i,
                    zookeeper,
                    root / f"data-{i}",
                    root / f"broker-{i}.log",
                    extra,
                    port=None if listeners else own[0],
                    metrics_port=metrics_port,
                    listeners=listeners,
                    listener_ports=dict(zip(listeners, own, strict=True)) if listeners else None,
                )
            )

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every broker: what clients take as ``bootstrap.servers``."""
        return ",".join(b.bootstrap for b in self.brokers)

    def bootstrap_for(self, listener: str) -> str:
        """``host:port,...`` of every broker's named listener."""
        return ",".join(b.listener_bootstrap(listener) for b in self.brokers)

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def start(self) -> None:
        for b in self.brokers:
            b.start()
        for b in self.brokers:
            b.wait_ready(expected_brokers=len(self.brokers))

    def stop(self) -> None:
        for b in self.brokers:
            if b.proc is not None and b.proc.poll() is None:
                b.stop()

    def restart(self) -> None:
        """Every broker stopped (SIGTERM, a clean shutdown), then all started again."""
        self.stop()
        self.start()

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_cluster(
    zookeeper: str,
    root: Path,
    size: int,
    extra: dict[str, str] | None = None,
    *,
    metrics: bool = False,
    listeners: Mapping[str, str] | None = None,
) -> Iterator[Cluster]:
    """A running :class:`Cluster` for the length of a generator fixture (``yield from``)."""
    with Cluster(zookeeper, root, size, extra, metrics=metrics, listeners=listeners) as cluster:
        yield cluster


def wait_for_leaders(
    brokers: Sequence[BrokerProcess], topic: str, partitions: int, timeout: float = START_TIMEOUT
) -> dict[int, int]:
    """partition -> leader, once every broker's Metadata gives each of ``topic``'s ``partitions``
    a live leader, the same in every view. (Brokers learn of a new topic, and of leadership
    changes, from ZooKeeper each on its own: right after CreateTopics, a restart or an election
    one may already name the new leader while another still names the old one or none; the
    views are asked again until they agree.)"""
    metadata = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    deadline = time.monotonic() + timeout
    while True:
        views: list[dict[int, int]] = []
        for broker in brokers:
            while True:
                response = request(broker.address, metadata, METADATA_VERSION)
                (found,) = response.topics
                live = {b.node_id for b in response.brokers}
                leaders = {p.partition_index: p.leader_id for p in found.partitions}
                if found.error_code == 0 and len(leaders) == partitions and set(leaders.values()) <= live:
                    views.append(leaders)
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"broker {broker.broker_id}: {topic} has partitions without a live leader: {found}"
                    )
                time.sleep(0.05)
        if all(view == views[0] for view in views):
            return views[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"the brokers still disagree on the leaders of {topic}: {views}")
        time.sleep(0.05)
