"""Fixtures of the loader tests: a 3-broker aggregate cluster per module, a producer of
mirrored-looking topics (zstd, confluent-kafka), ``tributary load`` as a subprocess, and
the warehouse read back with pyarrow."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.testing.cluster import Cluster, start_cluster

LOAD_TIMEOUT = 240.0


@pytest.fixture(scope="module")
def aggregate(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers standing in for the aggregate cluster, shared by a module's tests. (A short
    ZooKeeper session: a broker killed by a test is replaced as leader within seconds.)"""
    root = tmp_path_factory.mktemp("aggregate")
    settings = {"zookeeper.session.timeout.ms": "6000"}
    yield from start_cluster(server_chroot(zookeeper_server, "loader"), root, 3, settings)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


def create_topics(
    bootstrap: str, topics: Sequence[str], partitions: int = 3, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, partitions, 1, config=config or {}) for t in topics])
    for future in futures.values():
        future.result(30)


def headers_of(i: int) -> list[tuple[str, bytes]] | None:
    return [("n", str(i).encode()), ("h2", b"x")] if i % 10 == 0 else None


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    first_ms: int,
    step_ms: int,
    value_size: int = 100,
    tag: str = "",
    noise: int = 0,
) -> list[Produced]:
    """``count`` zstd-compressed records with increasing timestamps; every 10th has headers;
    ``noise`` random bytes (as hex) per value keep zstd from shrinking them."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 20, "batch.num.messages": 2000}
    )
    produced: list[Produced] = []
    failures: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)
            return
        # (Delivery reports do not carry headers back: rebuild them from the record's index.)
        i = int(msg.value().split(b"|")[2])
        headers = tuple((k, bytes(v)) for k, v in headers_of(i) or [])
        produced.append(
            Produced(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), headers)
        )

    for i in range(count):
        value = f"{topic}|{tag}|{i}|{os.urandom(noise).hex()}".encode().ljust(value_size, b"v")
        headers = headers_of(i)
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key=b"k%d" % i,
                    timestamp=first_ms + i * step_ms,
                    headers=headers,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures, failures[:3]
    assert len(produced) == count
    return produced


@dataclass
class LoadRun:
    returncode: int
    stdout: str
    stderr: str


def load_command(bootstrap: str, output: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tributary.deploy.cli",
        "load",
        "--bootstrap",
        bootstrap,
        "--output",
        output.as_uri(),
        *extra,
    ]


def run_load(
    bootstrap: str, output: Path, *extra: str, kill_at: str | None = None, timeout: float = LOAD_TIMEOUT
) -> LoadRun:
    """``tributary load`` in its own process group (so a kill takes its JVM and workers with it)."""
    env = dict(os.environ)
    env.pop("TRIBUTARY_LOADER_TEST_KILL_AT", None)
    if kill_at is not None:
        env["TRIBUTARY_LOADER_TEST_KILL_AT"] = kill_at
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    proc = subprocess.Popen(
        load_command(bootstrap, output, "--master", "local[2]", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    return finish_in_group(proc, timeout)


def finish_in_group(proc: subprocess.Popen[bytes], timeout: float = LOAD_TIMEOUT) -> LoadRun:
    """Its output once it exits; whatever the driver left (a JVM, Python workers) goes with its group."""
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return LoadRun(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def read_warehouse(output: Path) -> pa.Table:
    """Every published record, the partition columns restored from the directory names."""
    dataset = ds.dataset(
        output,
        format="parquet",
        partitioning=ds.partitioning(
            pa.schema([("topic", pa.string()), ("source_datacenter", pa.string()), ("event_date", pa.string())]),
            flavor="hive",
        ),
        exclude_invalid_files=False,
    )
    return dataset.to_table()


def loaded_keys(output: Path) -> list[tuple[str, int, int]]:
    table = read_warehouse(output).select(["topic", "partition", "offset"])
    return sorted(zip(*(table.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True))


def manifests(output: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((output / "_tributary" / "manifests").glob("*.json"))}


def commits(output: Path) -> list[str]:
    return sorted(p.stem for p in (output / "_tributary" / "offsets").glob("*.json"))
