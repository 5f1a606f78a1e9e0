"""Kill the load (driver, JVM and Python workers together, as a power cut would) at named
points of a run and at a random moment, rerun, and count: every record is loaded exactly once.
And kill the aggregate's leader under a load that is reading: it reads on from the new leader.

The named points use the loader's test hook (TRIBUTARY_LOADER_TEST_KILL_AT), which makes the
real code kill itself on reaching a phase; everything else is the real command. CI kills at two
of them, ``--long`` at all four and once more at a random moment."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tributary.testing.cluster import Cluster, wait_for_leaders

from .conftest import (
    commits,
    create_topics,
    finish_in_group,
    load_command,
    loaded_keys,
    manifests,
    produce,
    run_load,
    unique,
)

FIRST_MS = 1_709_326_800_000
KILLED = -signal.SIGKILL


#: The named kill points, in run order. CI kills at the two where a duplicate or a loss would come
#: from (files half published, a commit half done); --long at every one.
SHORT_PHASES = ("publish:2", "committed")
LONG_PHASES = ("read:1", "publish:2", "commit", "committed")


def test_kills_at_every_phase_leave_every_record_loaded_once(
    aggregate: Cluster, tmp_path: Path, long_run: bool
) -> None:
    tag = unique("")
    topics = [f"east.k{tag}", f"west.k{tag}", f"solo{tag}"]
    create_topics(aggregate.bootstrap, topics, partitions=2)
    output = tmp_path / "warehouse"
    produced = []

    def more(count: int, step: str) -> None:
        for topic in topics:
            produced.extend(produce(aggregate.bootstrap, topic, count, first_ms=FIRST_MS, step_ms=1000, tag=step))

    def load(kill_at: str | None) -> None:
        result = run_load(aggregate.bootstrap, output, "--topics", f".*{tag}", "--max-records-per-task", "700",
                          kill_at=kill_at)  # fmt: skip
        expected = 0 if kill_at is None else KILLED
        assert result.returncode == expected, f"kill at {kill_at}: {result.returncode}\n{result.stderr[-3000:]}"

    phases = LONG_PHASES if long_run else SHORT_PHASES
    more(2000, "a")
    for i, phase in enumerate(phases):
        # The first attempt plans run 1; b arrives after it, so every resumed attempt must
        # stick to that plan (run 1 never holds b).
        load(phase)
        if i == 0:
            more(500, "b")
        if phase == "read:1":  # a task kills everything after handing Spark its first records
            assert commits(output) == []
        elif phase == "publish:2":  # (re)staged, two files published, killed
            published = [f for f in output.rglob("*.parquet") if "_tributary" not in f.parts]
            assert len(published) == 2
        elif phase == "commit":  # publishing finished and the manifest written; killed before the commit
            assert commits(output) == []
    # "committed": run 1 committed, killed before cleaning its staging area up.
    assert commits(output) == ["00000001"]
    assert len(loaded_keys(output)) == 3 * 2000  # run 1 holds what was there when it was planned
    assert (output / "_tributary" / "staging" / "00000001").exists()
    more(300, "c")
    load(None)  # run 2: b and c
    assert commits(output) == ["00000001", "00000002"]
    assert sorted((p.topic, p.partition, p.offset) for p in produced) == loaded_keys(output)
    runs = manifests(output)
    assert runs["00000001"]["resumed"] is True
    assert [m["totals"]["rows"] for m in runs.values()] == [3 * 2000, 3 * 800]
    assert not (output / "_tributary" / "staging" / "00000001").exists()  # cleaned by the next run

    if not long_run:
        return  # CI stops here; --long also kills a run at a random moment (the Spark tests are CI's longest path)
    # A kill at a random moment (seeded: the failure names it), then a clean run.
    rng = random.Random(tag)
    more(400, "d")
    delay = rng.uniform(1.0, 20.0)
    proc = subprocess.Popen(
        load_command(aggregate.bootstrap, output, "--topics", f".*{tag}", "--max-records-per-task", "300"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    started = time.monotonic()
    load(None)
    keys = loaded_keys(output)
    assert sorted((p.topic, p.partition, p.offset) for p in produced) == keys, f"random kill after {delay:.1f} s"
    total = sum(m["totals"]["rows"] for m in manifests(output).values())
    assert total == len(produced), f"random kill after {delay:.1f} s"
    last = json.loads((output / "_tributary" / "offsets" / f"{commits(output)[-1]}.json").read_text())
    assert sum(sum(parts.values()) for parts in last["offsets"].values()) == len(produced)
    assert time.monotonic() - started < 240


def test_a_leader_killed_while_a_load_reads_costs_nothing(aggregate: Cluster, tmp_path: Path) -> None:
    """Replication factor 3: task 0 pauses after handing Spark its records; the leader of the
    partition is killed with -9, and the load reads on at once while the partition has no live
    leader yet (until the dead broker's ZooKeeper session expires): the tasks after it retry
    until the new leader answers, whose high watermark they wait for too. The dead broker is
    restarted meanwhile. Every record is loaded once, by one run."""
    topic = unique("ha")
    admin = AdminClient({"bootstrap.servers": aggregate.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    produced = produce(aggregate.bootstrap, topic, 3000, first_ms=FIRST_MS, step_ms=1000)  # acks=all
    output, markers = tmp_path / "warehouse", tmp_path / "markers"
    markers.mkdir()
    env = dict(os.environ, TRIBUTARY_LOADER_TEST_KILL_AT="pause:0", TRIBUTARY_LOADER_TEST_MARKER_DIR=str(markers),
               SPARK_LOCAL_IP="127.0.0.1")  # fmt: skip
    command = load_command(aggregate.bootstrap, output, "--topics", topic, "--max-records-per-task", "500",
                           "--master", "local[1]")  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not (markers / "paused-0").exists():
            assert proc.poll() is None, finish_in_group(proc).stderr[-3000:]
            assert time.monotonic() < deadline, "task 0 never paused"
            time.sleep(0.1)
        victim = aggregate.broker(wait_for_leaders(aggregate.brokers, topic, 1)[0])
        victim.kill()
    finally:
        (markers / "resume-0").touch()
    victim.start()  # at once: it waits for its old registration to expire, then follows
    victim.wait_ready(expected_brokers=3)
    leader = wait_for_leaders(aggregate.brokers, topic, 1)[0]
    print(f"leader {victim.broker_id} killed under the load; {leader} leads now")
    run = finish_in_group(proc)
    assert run.returncode == 0, run.stderr[-3000:]
    assert loaded_keys(output) == sorted((p.topic, p.partition, p.offset) for p in produced)
    assert [m["totals"]["rows"] for m in manifests(output).values()] == [3000]
