"""Brokers as child processes (``python -m tributary.deploy.cli broker``), one or a cluster.

Each broker gets a free port, a data directory and a log file under the given root, and a
TOML config file of the extra settings; a cluster's brokers share one ZooKeeper connection
string (give each cluster a chroot of its own: :func:`tributary.testing.zookeeper.new_chroot`).
:class:`Cluster` is a context manager that starts every broker, waits until each answers
Metadata with the whole cluster and a controller, and stops them (SIGTERM) on the way out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from kazoo.client import KazooClient

from tributary.protocol.messages import MetadataRequest
from tributary.testing.ports import free_port, free_ports
from tributary.testing.processes import ListeningProcess
from tributary.testing.wire import request

#: How long a broker may take to answer Metadata after its start.
START_TIMEOUT = 30.0
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
    ) -> None:
        self.broker_id = broker_id
        self.zookeeper = zookeeper
        self.data_dir = data_dir
        self.log_path = log_path
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
        config.write_text("".join(f"{k} = {v}\n" for k, v in self.extra.items()))
        cmd = [
            sys.executable, "-m", "tributary.deploy.cli", "broker",
            "--id", str(self.broker_id),
            "--listen", self.bootstrap,
            "--data-dir", str(self.data_dir),
            "--zookeeper", self.zookeeper,
            "--config", str(config),
        ]  # fmt: skip
        if self.metrics_port is not None:
            cmd += ["--metrics-port", str(self.metrics_port)]
        if self.advertise is not None:
            cmd += ["--advertise", self.advertise]
        # Unbuffered, so the log file shows what the broker said up to the moment it was killed.
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

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
    serves Prometheus metrics on a port of its own (``BrokerProcess.metrics_port``)."""

    def __init__(
        self, zookeeper: str, root: Path, size: int, extra: dict[str, str] | None = None, *, metrics: bool = False
    ) -> None:
        ports = free_ports(size * 2 if metrics else size)
        metrics_ports: list[int | None] = list(ports[size:]) if metrics else [None] * size
        self.brokers = [
            BrokerProcess(
                i, zookeeper, root / f"data-{i}", root / f"broker-{i}.log", extra, port=port, metrics_port=metrics_port
            )
            for i, port, metrics_port in zip(range(1, size + 1), ports[:size], metrics_ports, strict=True)
        ]

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every broker: what clients take as ``bootstrap.servers``."""
        return ",".join(b.bootstrap for b in self.brokers)

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
    zookeeper: str, root: Path, size: int, extra: dict[str, str] | None = None, *, metrics: bool = False
) -> Iterator[Cluster]:
    """A running :class:`Cluster` for the length of a generator fixture (``yield from``)."""
    with Cluster(zookeeper, root, size, extra, metrics=metrics) as cluster:
        yield cluster


def wait_for_leaders(
    brokers: Sequence[BrokerProcess], topic: str, partitions: int, timeout: float = START_TIMEOUT
) -> dict[int, int]:
    """partition -> leader, once every broker's Metadata gives each of ``topic``'s ``partitions``
    a live leader, the same in every view. (Brokers learn of a new topic, and of leadership
    changes, from ZooKeeper each on its own: right after CreateTopics or a restart one may
    already name the leader while another does not know it yet.)"""
    metadata = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    deadline = time.monotonic() + timeout
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
                raise TimeoutError(f"broker {broker.broker_id}: {topic} has partitions without a live leader: {found}")
            time.sleep(0.05)
    if any(view != views[0] for view in views):
        raise AssertionError(f"the brokers disagree on the leaders of {topic}: {views}")
    return views[0]
