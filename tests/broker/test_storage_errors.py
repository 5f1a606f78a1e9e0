"""A full disk is an error for the partitions on it, not a crash: produce answers
KAFKA_STORAGE_ERROR while the disk is full, the broker keeps serving reads, logs the incident
once, and takes writes again by itself once space is freed; nothing acknowledged is lost.

The broker's data directory is a small tmpfs mounted for the test (it needs root, as CI has)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.protocol.error_codes import ErrorCode
from tributary.testing.history import History, read_partitions, sequence_value
from tributary.testing.wire import WireConnection

from .wire_helpers import Bystander, batch, connect, create_topic, fetch_bytes, produce, running_broker, values

DISK_BYTES = 12 << 20
BALLAST_BYTES = 4 << 20
VALUE = 16_000  # four records a batch: 64 KB


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "data-1"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_answers_storage_errors_then_recovers_with_nothing_lost(
    zookeeper_server: ZooKeeperServer, tmp_path: Path, small_disk: Path
) -> None:
    # Ballast that the test deletes to free the disk; segments of 1 MiB so rolls happen.
    ballast = small_disk / "ballast"
    ballast.write_bytes(os.urandom(BALLAST_BYTES))
    with running_broker(zookeeper_server, tmp_path, {"log.segment.bytes": str(1 << 20)}) as cluster:
        broker = cluster.brokers[0]
        bystander = Bystander(broker)
        bystander.check()
        with connect(broker) as conn:
            topic = create_topic(conn)
            history = History()
            refused = _produce_until_refused(conn, topic, history)
            assert refused == ErrorCode.KAFKA_STORAGE_ERROR
            full_at = len(history.acknowledged)
            assert full_at > 20, f"the disk filled after only {full_at} records"
            # While the disk is full: every write of that size is refused with the same error,
            # the broker serves what it has, and the same connection keeps working.
            for _ in range(10):
                numbered = [history.next_value() for _ in range(4)]
                assert produce(conn, topic, _big_batch(numbered)) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
                for sequence, _ in numbered:
                    history.fail(sequence, "KAFKA_STORAGE_ERROR")
            assert len(values(fetch_bytes(conn, topic, 0))) > 0
            assert broker.proc is not None and broker.proc.poll() is None

            ballast.unlink()
            # Space again: the next write is taken, with no restart and no operator.
            sequence, value = history.next_value()
            error, offset = produce(conn, topic, batch(value))
            assert (error, offset) == (ErrorCode.NONE, full_at)
            history.acknowledge(sequence, 0, offset)
            bystander.check()

        verdict = history.check(read_partitions(broker.bootstrap, topic))
        assert verdict.ok, verdict
        assert verdict.acknowledged == full_at + 1
        log = broker.log_path.read_text()
        # One line for the incident and one for its end, not one per refused request.
        assert log.count("KAFKA_STORAGE_ERROR until it works again") == 1, broker.log_tail()
        assert log.count("storage works again") == 1
        assert "Traceback" not in log
        bystander.close()


def _produce_until_refused(conn: WireConnection, topic: str, history: History) -> int:
    """Batches of four big records until the broker refuses one; returns the refusal's code."""
    for _ in range(10_000):
        numbered = [history.next_value() for _ in range(4)]
        error, offset = produce(conn, topic, _big_batch(numbered))
        for i, (sequence, _) in enumerate(numbered):
            if error == ErrorCode.NONE:
                history.acknowledge(sequence, 0, offset + i)
            else:
                history.fail(sequence, ErrorCode(error).name)
        if error != ErrorCode.NONE:
            return int(error)
    raise AssertionError("the disk never filled")


def _big_batch(numbered: list[tuple[int, bytes]]) -> bytes:
    """One batch of the numbered records, each padded with incompressible bytes."""
    return batch(*(sequence_value(sequence, os.urandom(VALUE // 2).hex().encode()) for sequence, _ in numbered))
