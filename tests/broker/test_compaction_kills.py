"""A broker killed (SIGKILL, a real crash) at each named step of a clean comes back with a valid
log: every record read back is the one produced at its offset, the latest value of each key is
there, no temporary file of the clean is left, and the cleaner compacts again.

The hook (``TRIBUTARY_CLEANER_TEST_KILL_AT``, broker/log/cleaner/hooks.py) kills the broker when
a clean reaches the step, in the broker itself or from its cleaner's worker process. One broker
goes through the steps in turn: killed at one, restarted, killed at the next, and so on; CI runs
two of them (one in the worker, one between the commit point and the last rename), ``--long``
all. (tests/broker/log/cleaner/test_clean.py cuts a clean at every step in-process, in CI.)

The broker is armed through a file (``@path``), and the topic's ``min.compaction.lag.ms`` holds
cleaning back while the test produces and reads: only then is the hook armed and the lag
dropped, so the kill lands after the test's own requests, never in them. (Armed by a restart,
a restarted broker could meet the step at once, cleaning what the killed clean left dirty,
and die under the test's next produce: a CI run saw it.)
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.broker.test_compaction_live import COMPACTED, check_faithful, latest, new_topic, produce, read
from tests.fixtures.brokers import module_cluster
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.broker.log.cleaner.hooks import KILL_ENV, PHASES
from tributary.testing.cluster import BrokerProcess, Cluster
from tributary.testing.polling import eventually

SHORT_PHASES = ("cleaned-written", "old-deleted")
SETTINGS = {"log.cleaner.backoff.ms": "100", "zookeeper.session.timeout.ms": "2000"}
TIMEOUT = 30.0
#: min.compaction.lag.ms while the test produces and reads: the records are minutes younger.
HELD_BACK_MS = "3600000"


@pytest.fixture
def phases(long_run: bool) -> tuple[str, ...]:
    return PHASES if long_run else SHORT_PHASES


@pytest.fixture
def armed(tmp_path: Path) -> Path:
    """The file the broker's kill hook reads its step from (empty: disarmed)."""
    path = tmp_path / "kill-at"
    path.write_text("")
    return path


@pytest.fixture
def cluster(
    zookeeper_server: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, armed: Path
) -> Iterator[Cluster]:
    monkeypatch.setenv(KILL_ENV, f"@{armed}")
    yield from module_cluster(zookeeper_server, tmp_path, SETTINGS, size=1)


def _set_lag(cluster: Cluster, topic: str, lag_ms: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    entry = ConfigEntry("min.compaction.lag.ms", lag_ms, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource], request_timeout=5)[resource].result(TIMEOUT)


def _restart(broker: BrokerProcess) -> None:
    broker.wait_deregistered()
    broker.start()
    broker.wait_ready()


def _left_before(directory: Path, moment: float) -> list[str]:
    """The temporary files of a clean in ``directory`` last changed before ``moment``.

    By their ctime: a cleaned ``.log`` gets the mtime of the segments it replaces (retention by
    time falls back on it), so a clean begun after ``moment`` writes files with older mtimes.
    """
    left = []
    for path in directory.iterdir():
        if path.suffix in (".cleaned", ".swap"):
            try:
                if path.stat().st_ctime < moment:
                    left.append(path.name)
            except FileNotFoundError:
                pass  # a running clean renamed or removed it meanwhile
    return left


def test_a_broker_killed_at_each_step_of_a_clean_recovers_a_valid_log(
    cluster: Cluster, armed: Path, phases: tuple[str, ...]
) -> None:
    broker = cluster.brokers[0]
    topic = new_topic(cluster, {**COMPACTED, "segment.bytes": "4096", "min.compaction.lag.ms": HELD_BACK_MS})
    produced: dict[int, tuple[bytes, bytes | None]] = {}
    pairs: list[tuple[bytes, bytes | None]] = []
    for i, phase in enumerate(phases):
        more: list[tuple[bytes, bytes | None]] = [
            (b"key-%02d" % (j % 30), b"%s-%d" % (phase.encode(), j)) for j in range(3000)
        ]
        more += [(b"key-%02d" % (i % 30), None)]
        pairs += more
        produced.update(produce(cluster, topic, more))
        armed.write_text(phase)
        assert broker.proc is not None
        try:
            _set_lag(cluster, topic, "0")
        except KafkaException:
            # A clean of what the last killed one left dirty, disarmed until a moment ago,
            # met the step first: the kill this round is that one.
            assert broker.proc.poll() is not None, "the lag could not be dropped"
        code = broker.proc.wait(TIMEOUT)  # the clean reaches the step: killed there
        assert code == -signal.SIGKILL, broker.log_tail()
        armed.write_text("")
        restarted_at = time.time()
        _restart(broker)
        _set_lag(cluster, topic, HELD_BACK_MS)
        records = read(cluster, topic)
        check_faithful(records, produced)
        assert latest(records) == {k: v for k, v in dict(pairs).items() if v is not None}, phase
        # Nothing of the killed clean is left. (The restarted broker's cleaner may already be
        # writing a clean of its own, whose files are newer than the restart.)
        assert _left_before(broker.data_dir / f"{topic}-0", restarted_at) == [], phase
    # Unarmed, the cleaner finishes the job.
    _set_lag(cluster, topic, "0")
    compacted = eventually(
        lambda: r if len(r := read(cluster, topic)) < len(produced) // 2 else None,
        TIMEOUT,
        "compaction after the kills",
    )
    check_faithful(compacted, produced)
    assert latest(compacted) == {k: v for k, v in dict(pairs).items() if v is not None}
