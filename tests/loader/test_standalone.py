"""The load on a standalone Spark cluster: a master and two workers, each its own JVM, the
executors in JVMs and Python workers of their own. The loader's code reaches them only as
the archive the driver ships. Exactly once holds when an executor's Python worker is killed
and, in the next run, when a whole worker JVM is killed under a running task; a second load
started meanwhile is refused by the warehouse's lease.

Two runs share one cluster: each Spark start costs seconds on two cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tributary.testing.cluster import Cluster

from .conftest import (
    commits,
    create_topics,
    finish_in_group,
    load_command,
    loaded_keys,
    produce,
    run_load,
    unique,
)
from .spark_standalone import SparkStandalone, spark_standalone

FIRST_MS = 1_709_326_800_000
PAUSE_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    with spark_standalone(tmp_path_factory.mktemp("spark"), workers=2) as cluster:
        yield cluster


def cluster_load(
    spark: SparkStandalone, bootstrap: str, output: Path, markers: Path, hook: str
) -> subprocess.Popen[bytes]:
    """``tributary load --master spark://...`` with an executor-side test hook (hooks.py)."""
    markers.mkdir()
    env = dict(
        os.environ,
        TRIBUTARY_LOADER_TEST_KILL_AT=hook,
        TRIBUTARY_LOADER_TEST_MARKER_DIR=str(markers),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return subprocess.Popen(
        load_command(bootstrap, output, "--master", spark.url, "--max-records-per-task", "400"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )


def finish(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    run = finish_in_group(process)
    return run.returncode, run.stdout + run.stderr


def wait_for_pause(markers: Path, process: subprocess.Popen[bytes]) -> int:
    """The pid of the Python worker that paused in its task."""
    deadline = time.monotonic() + PAUSE_TIMEOUT
    while not (paused := sorted(markers.glob("paused-*"))):
        assert process.poll() is None, finish(process)[1][-3000:]
        assert time.monotonic() < deadline, "no task reached the pause"
        time.sleep(0.1)
    return int(paused[0].read_text().split()[0])


def test_exactly_once_through_a_lost_python_worker_and_a_lost_worker_jvm(
    aggregate: Cluster, spark: SparkStandalone, tmp_path: Path
) -> None:
    tag = unique("")
    topics = [f"east.pages{tag}", f"west.clicks{tag}"]
    create_topics(aggregate.bootstrap, topics, partitions=3)
    output = tmp_path / "warehouse"
    produced = [p for t in topics for p in produce(aggregate.bootstrap, t, 2_000, first_ms=FIRST_MS, step_ms=1_000)]

    # Run 1: the Python worker of task 0 dies after handing Spark its first chunk; Spark retries it.
    status, log = finish(cluster_load(spark, aggregate.bootstrap, output, tmp_path / "markers-1", "worker:0"))
    assert status == 0, log[-3000:]
    # The kill happened, in an executor that imported the loader from the archive the driver shipped.
    _pid, module = (tmp_path / "markers-1" / "worker-0").read_text().split()
    assert module.endswith("tributary.zip/tributary/loader/hooks.py"), module
    assert loaded_keys(output) == sorted((p.topic, p.partition, p.offset) for p in produced)
    assert commits(output) == ["00000001"]

    # Run 2: task 1 pauses; meanwhile a second load is refused, then the worker JVM running the
    # paused task is killed with its executor, and the run completes on the other worker.
    produced += [
        p for t in topics for p in produce(aggregate.bootstrap, t, 2_000, first_ms=FIRST_MS, step_ms=1_000, tag="2")
    ]
    second = cluster_load(spark, aggregate.bootstrap, output, tmp_path / "markers-2", "pause:1")
    paused = wait_for_pause(tmp_path / "markers-2", second)

    rival = run_load(aggregate.bootstrap, output, "--master", "local[1]")
    assert rival.returncode == 1, rival.stderr[-3000:]
    assert "another load holds the warehouse" in rival.stderr

    spark.kill_worker_holding(paused)
    status, log = finish(second)
    assert status == 0, log[-3000:]
    assert loaded_keys(output) == sorted((p.topic, p.partition, p.offset) for p in produced)
    assert commits(output) == ["00000001", "00000002"]
    assert not (output / "_tributary" / "lease").exists()
