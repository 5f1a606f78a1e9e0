"""Partition reassignment with real clients: four brokers, a topic on three of them moved while an
acks=all producer writes, through `tributary topics reassign` and Kafka's reassignment JSON.

Every acknowledged record must be read back exactly once and in order (the history checker);
the new replica holds the same bytes as the others; the dropped replica's log is deleted; a
move that cannot finish shows in ListPartitionReassignments and can be cancelled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.replication.background import BackgroundProducer
from tests.broker.replication.test_failover import SETTINGS, partition_states, segment_bytes, wait_for
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
)
from tributary.testing.cluster import Cluster
from tributary.testing.history import read_partitions, wait_until_served
from tributary.testing.wire import request


@pytest.fixture
def cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(zookeeper.hosts, tmp_path, 4, SETTINGS) as running:
        yield running


def reassign(cluster: Cluster, tmp_path: Path, mode: str, plan: dict[int, list[int]] | None = None, *,
             topic: str = "moving", bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    command = [sys.executable, "-m", "tributary.deploy.cli", "topics", "--bootstrap", bootstrap or cluster.bootstrap,
               "reassign", f"--{mode}"]  # fmt: skip
    if plan is not None:
        path = tmp_path / "reassignment.json"
        entries = [
            {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for p, r in plan.items()
        ]
        path.write_text(json.dumps({"version": 1, "partitions": entries}))
        command += ["--reassignment-json-file", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def create_on(cluster: Cluster, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
    admin.create_topics([new], operation_timeout=30)[topic].result(timeout=30)
    wait_for(lambda: all(len(s[3]) == 3 for s in partition_states(cluster.brokers[0], topic).values()), 30, "ISR")


def test_reassignment_moves_replicas_and_leadership_losing_nothing(cluster: Cluster, tmp_path: Path) -> None:
    create_on(cluster, "moving", [[1, 2, 3], [2, 3, 1]])
    # Partition 0 loses its leader (1) to the new broker 4; partition 1 keeps its leader (2).
    plan = {0: [4, 2, 3], 1: [2, 4, 1]}
    with BackgroundProducer(cluster.bootstrap, "moving") as background:
        wait_for(lambda: background.acknowledged() > 500, 30, "the stream to start")
        started = reassign(cluster, tmp_path, "execute", plan)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "Successfully started partition reassignments for moving-0,moving-1" in started.stdout
        assert '{"topic":"moving","partition":0,"replicas":[1,2,3]' in started.stdout  # the rollback file
        took = wait_for(lambda: reassign(cluster, tmp_path, "verify", plan).returncode == 0, 60, "the moves")
        print(f"both moves completed {took:.1f} s after they started")
        before = background.acknowledged()
        wait_for(lambda: background.acknowledged() > before + 500, 30, "the stream to go on")
    verified = reassign(cluster, tmp_path, "verify", plan)
    assert "Reassignment of partition moving-0 is completed." in verified.stdout
    states = partition_states(cluster.brokers[3], "moving")
    assert {p: (s[2], s[3]) for p, s in states.items()} == {0: ([4, 2, 3], [2, 3, 4]), 1: ([2, 4, 1], [1, 2, 4])}
    assert states[0][0] in (2, 3, 4) and states[1][0] == 2
    assert reassign(cluster, tmp_path, "list").stdout.strip() == "No partition reassignments found."
    # --generate proposes Kafka's placement over the brokers given, in the format --execute takes.
    (tmp_path / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"topic": "moving"}]}))
    generated = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "topics", "--bootstrap", cluster.bootstrap, "reassign",
         "--generate", "--topics-to-move-json-file", str(tmp_path / "topics.json"), "--broker-list", "1,2,3"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    proposed = json.loads(generated[generated.index("Proposed partition reassignment configuration") + 1])
    assert [(e["partition"], sorted(e["replicas"])) for e in proposed["partitions"]] == [(0, [1, 2, 3]), (1, [1, 2, 3])]
    assert [e["replicas"][0] for e in proposed["partitions"]] == [1, 2]  # leaders spread
    # Nothing acknowledged was lost or repeated, and the new replicas hold the same bytes.
    history = background.history
    wait_until_served(cluster.bootstrap, "moving", history)
    verdict = history.check(read_partitions(cluster.bootstrap, "moving"))
    print(verdict)
    assert verdict.ok, verdict
    assert not history.failed
    for partition, replicas in plan.items():

        def agree(p: int = partition, r: list[int] = replicas) -> bool:
            return len({segment_bytes(cluster.broker(b).data_dir, "moving", p) for b in r}) == 1

        wait_for(agree, 10, "the replicas to agree")
        assert len(segment_bytes(cluster.broker(replicas[0]).data_dir, "moving", partition)) > 0
    # The replica that left partition 0 deleted its log; broker 3 left partition 1.
    wait_for(lambda: not (cluster.broker(1).data_dir / "moving-0").exists(), 10, "broker 1 to drop moving-0")
    wait_for(lambda: not (cluster.broker(3).data_dir / "moving-1").exists(), 10, "broker 3 to drop moving-1")


@pytest.fixture
def patient_cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    """A ZooKeeper session long enough that a paused broker stays registered throughout."""
    with Cluster(zookeeper.hosts, tmp_path, 4, {**SETTINGS, "zookeeper.session.timeout.ms": "30000"}) as running:
        yield running


def test_a_move_that_cannot_finish_is_listed_and_cancelled(patient_cluster: Cluster, tmp_path: Path) -> None:
    cluster = patient_cluster
    controller = cluster.broker(request(cluster.brokers[0].address, MetadataRequest(topics=[]), 1).controller_id)
    # The broker to add is paused: registered, but never catching up. The tools talk to the
    # controller only (a paused broker answers no one).
    target = next(b for b in cluster.brokers if b is not controller)
    original = [b.broker_id for b in cluster.brokers if b is not target]
    removed = next(b for b in original if b != controller.broker_id)
    moved = [target.broker_id] + [b for b in original if b != removed]
    create_on(cluster, "stuck", [original])
    plan = {0: moved}
    ids = ",".join(map(str, [*moved, removed]))
    assert target.proc is not None
    os.kill(target.proc.pid, signal.SIGSTOP)
    try:
        started = reassign(cluster, tmp_path, "execute", plan, topic="stuck", bootstrap=controller.bootstrap)
        assert started.returncode == 0, started.stdout + started.stderr
        listed = reassign(cluster, tmp_path, "list", bootstrap=controller.bootstrap)
        assert f"stuck-0: replicas: {ids}. adding: {target.broker_id}. removing: {removed}." in listed.stdout
        assert (
            reassign(cluster, tmp_path, "verify", plan, topic="stuck", bootstrap=controller.bootstrap).returncode == 1
        )
        # On the wire too: ListPartitionReassignments, and refusals that name what is wrong.
        ongoing = request(controller.address, ListPartitionReassignmentsRequest(topics=None), 0).topics
        found = [(t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
                 for t in ongoing for p in t.partitions]  # fmt: skip
        assert found == [("stuck", 0, [*moved, removed], [target.broker_id], [removed])]
        alter = AlterPartitionReassignmentsRequest(topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
            name="stuck", partitions=[AlterPartitionReassignmentsRequest.ReassignablePartition(
                partition_index=0, replicas=[9, *original[1:]])])])  # fmt: skip
        (refused,) = request(controller.address, alter, 0).responses[0].partitions
        assert refused.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert "[9]" in (refused.error_message or "")
        cancelled = reassign(cluster, tmp_path, "cancel", plan, topic="stuck", bootstrap=controller.bootstrap)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert "Successfully cancelled partition reassignments for: stuck-0" in cancelled.stdout
        states = partition_states(controller, "stuck")
        # Back to the original replicas, in the order the move had them (as Kafka does: the
        # replica set less the ones being added).
        assert (states[0][2], sorted(states[0][3])) == ([*moved[1:], removed], sorted(original))
        listed = reassign(cluster, tmp_path, "list", bootstrap=controller.bootstrap)
        assert listed.stdout.strip() == "No partition reassignments found."
        # Cancelling again: nothing is moving.
        cancel = AlterPartitionReassignmentsRequest(topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
            name="stuck", partitions=[AlterPartitionReassignmentsRequest.ReassignablePartition(
                partition_index=0, replicas=None)])])  # fmt: skip
        (again,) = request(controller.address, cancel, 0).responses[0].partitions
        assert again.error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    finally:
        os.kill(target.proc.pid, signal.SIGCONT)
    # The broker that was to be added drops what it had started to hold.
    wait_for(lambda: not (target.data_dir / "stuck-0").exists(), 15, "broker 4 to drop stuck-0")
