"""Exactly once across crashes: kill -9 the mirror again and again, and an aggregate broker.

A 1M-record zstd stream flows into the source while the mirror is killed with
SIGKILL five times at random moments and restarted each time, and one
aggregate broker is killed and restarted mid-stream. Afterwards every source
batch is in the aggregate exactly once, in order, byte for byte.

The same schedule runs again with the source reached over SASL_SSL (SCRAM-SHA-512 as user
``mirror``, its settings in a ``--source-command-config`` file), as a mirror reads across the
WAN; a quarter of the records, to keep the suite within its budget (every byte the mirror
fetches is then decrypted in Python).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.security import client_settings, start_secure_cluster, write_command_config
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.testing.cluster import Cluster, start_cluster

from .helpers import assert_exact_copy, copied_everything, produce_zstd, wait_for

RECORDS = 1_000_000
PRODUCERS = 4
TOPIC = "activity"
#: Fast group rebalances, and a registration that expires soon after a kill -9.
SOURCE_CONFIG = {"num.partitions": "4", "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
AGGREGATE_CONFIG = {"zookeeper.session.timeout.ms": "2000"}


@dataclass
class Link:
    east: Cluster
    agg: Cluster
    #: What the mirror is given to reach the source: its bootstrap and extra flags.
    source: str
    flags: list[str]
    records: int


@pytest.fixture(params=["plaintext", "sasl_ssl"])
def link(request: pytest.FixtureRequest, zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Link]:
    for name in ("east", "agg"):
        (tmp_path / name).mkdir()
    for agg in start_cluster(zookeeper.hosts + "/agg", tmp_path / "agg", 2, AGGREGATE_CONFIG):
        if request.param == "plaintext":
            for east in start_cluster(zookeeper.hosts + "/east", tmp_path / "east", 1, SOURCE_CONFIG):
                yield Link(east, agg, east.bootstrap, [], RECORDS)
            return
        extra = {key: json.dumps(value) for key, value in SOURCE_CONFIG.items()}
        for secure in start_secure_cluster(zookeeper.hosts + "/east", tmp_path / "east", 1, extra):
            settings = write_command_config(
                tmp_path / "east.properties", client_settings(secure.pki, "scram", "mirror")
            )
            flags = ["--source-command-config", str(settings)]
            yield Link(secure.cluster, agg, secure.bootstrap("scram"), flags, RECORDS // 4)


def test_kill_9_mirror_five_times_and_an_aggregate_broker(link: Link, tmp_path: Path) -> None:
    east, agg, records = link.east, link.agg, link.records
    rng = random.Random(20261122)
    errors: list[BaseException] = []

    def produce(index: int) -> None:
        share = records // PRODUCERS
        try:
            # In slices, so the stream lasts while the mirror is being killed.
            end = (index + 1) * share
            for start in range(index * share, end, 25_000):
                produce_zstd(east.bootstrap, TOPIC, min(25_000, end - start), start=start, source="east")
        except BaseException as exc:
            errors.append(exc)

    producers = [threading.Thread(target=produce, args=(i,), daemon=True) for i in range(PRODUCERS)]
    for thread in producers:
        thread.start()
    extra = ["--session-timeout-ms", "2000", "--fetch-partition-max-bytes", "262144", *link.flags]
    log_path = tmp_path / "mirror.log"
    mirror = MirrorProcess(link.source, "east", agg.bootstrap, log_path, extra=extra)
    mirror.start()
    kills = 0
    try:
        for kills in range(1, 6):
            time.sleep(rng.uniform(1.0, 4.0))
            if kills == 3:
                # An aggregate broker dies under the running mirror, which must wait for it and go on.
                victim = agg.brokers[1]
                victim.kill()
                victim.wait_deregistered()
                victim.start()
                victim.wait_ready(expected_brokers=2)
                time.sleep(rng.uniform(0.5, 2.0))
            mirror.kill()
            mirror.start()
        for thread in producers:
            thread.join(timeout=300)
        assert not errors, errors
        wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, "east", TOPIC), 240,
                 "the aggregate to catch up", mirror.log_tail)  # fmt: skip
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
    assert kills == 5
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, "east", TOPIC) == records
    # Six lives: each restart resumed from recorded progress (reconciling past it when the
    # kill came between an append and its checkpoint, which depends on timing).
    assert log_path.read_text().count("event=started") == 6
