"""`tributary up` for real: ZooKeeper, brokers (and mirrors) as supervised processes."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import trio

from tributary.deploy.appliance.probe import ProbeError, broker_metadata, cluster_ready
from tributary.deploy.appliance.topology import load_topology

from .topologies import alive, running_up, write_topology

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def tributary(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def wait_until_answers(addresses: list[str], timeout: float = 60.0) -> None:
    async def poll() -> None:
        with trio.fail_after(timeout):
            while True:
                try:
                    await cluster_ready(addresses)
                except ProbeError:
                    await trio.sleep(0.2)
                else:
                    return

    trio.run(poll)


def test_up_starts_everything_restarts_a_killed_broker_and_stops_cleanly(tmp_path: Path) -> None:
    topology_path = write_topology(tmp_path / "t.toml", brokers=2)
    topology = load_topology(topology_path)
    with running_up(topology_path, tmp_path / "up.out") as up:
        out = up.output()
        # Where everything listens, and every cluster answers with all its brokers and a controller.
        for cluster in topology.clusters.values():
            for broker in cluster.brokers:
                assert re.search(rf"^broker/{cluster.name}/{broker.id} +{broker.address} ", out, re.MULTILINE)
            metadata = trio.run(broker_metadata, *cluster.brokers[0].address.split(":"))
            assert sorted(metadata.brokers) == [1, 2]
            assert metadata.controller_id in (1, 2)
        assert (topology.run_dir / "logs" / "broker-east-1.log").stat().st_size > 0
        pids = up.pids()
        assert set(pids) == {
            "zookeeper/east", "zookeeper/aggregate",
            "broker/east/1", "broker/east/2", "broker/aggregate/1", "broker/aggregate/2",
        }  # fmt: skip

        # kill -9 one broker: noticed, and restarted once ZooKeeper dropped its registration.
        killed_at = time.monotonic()
        os.kill(pids["broker/east/2"], signal.SIGKILL)
        up.wait_for(r"broker/east/2: pid \d+ killed by SIGKILL", timeout=10)
        up.wait_for(r"broker/east/2: waiting for its old ZooKeeper session to expire", timeout=10)
        restarted = up.wait_for(r"broker/east/2: started \(pid (\d+)\)", since=len(out), timeout=60)
        assert int(restarted[1]) != pids["broker/east/2"]
        wait_until_answers([b.address for b in topology.clusters["east"].brokers])
        took = time.monotonic() - killed_at
        # The session timeout is 6 s; the restart waited for it, not for a long backoff.
        assert took < 30, took
        print(f"broker killed with SIGKILL answered again after {took:.1f} s")
        children = up.pids()
    # Stopped on SIGTERM, in order, with nothing left running.
    out = up.output()
    assert up.proc.returncode == 0, out
    stops = [m[1] for m in re.finditer(r" (\S+): stopped \(pid", out)]
    last_broker = max(i for i, name in enumerate(stops) if name.startswith("broker/"))
    first_zookeeper = min(i for i, name in enumerate(stops) if name.startswith("zookeeper/"))
    assert last_broker < first_zookeeper, stops
    assert re.search(r"broker/east/1: stopped \(pid \d+, exited with status 0\)", out)
    assert not [name for name, pid in children.items() if alive(pid)]


def test_bad_topology_is_one_line(tmp_path: Path) -> None:
    path = write_topology(tmp_path / "t.toml")
    path.write_text(path.read_text().replace('cluster = "aggregate"', 'cluster = "agregate"'))
    result = tributary("up", "--topology", str(path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert re.fullmatch(
        r"tributary up: \S+t\.toml: load 'nightly' names unknown cluster 'agregate' \(line \d+\)\n", result.stderr
    )


def test_production_topology_is_refused_with_a_reason() -> None:
    result = tributary("up", "--topology", str(EXAMPLES / "production.toml"))
    assert result.returncode == 2
    assert "lists 3 ZooKeeper servers: tributary up runs one standalone server per cluster" in result.stderr
    assert "Traceback" not in result.stderr


def test_address_in_use_is_named_before_anything_starts(tmp_path: Path) -> None:
    path = write_topology(tmp_path / "t.toml")
    broker = load_topology(path).clusters["aggregate"].brokers[0]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", broker.port))
        sock.listen()
        result = tributary("up", "--topology", str(path))
    assert result.returncode == 1
    assert f"broker/aggregate/1: 127.0.0.1:{broker.port} is in use" in result.stderr
    assert "started" not in result.stdout
    assert "Traceback" not in result.stderr


def test_second_up_on_the_same_run_dir_is_refused(tmp_path: Path) -> None:
    path = write_topology(tmp_path / "t.toml", datacenters=("solo",))
    with running_up(path, tmp_path / "up.out") as up:
        result = tributary("up", "--topology", str(path))
        assert result.returncode == 1
        assert f"is in use by `tributary up` (pid {up.proc.pid})" in result.stderr
