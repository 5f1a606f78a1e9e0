"""The broker keeps data in the page cache, not on its heap.

Hundreds of megabytes go through one broker (produced by confluent-kafka and
consumed back); the broker's peak resident set (VmHWM) stays under 256 MiB.
"""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tributary.testing.cluster import Cluster

MESSAGE = 4096
COUNT = 80_000  # 320 MiB: more than the RSS budget, so a heap copy of the log would show
RSS_LIMIT = 256 * 1024 * 1024


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def test_rss_stays_bounded_while_the_log_grows(single_broker: Cluster) -> None:
    broker = single_broker.brokers[0]
    assert broker.proc is not None
    payload = os.urandom(MESSAGE)  # incompressible: the log really holds COUNT * MESSAGE bytes
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1})
    errors: list[object] = []
    for i in range(COUNT):
        while True:
            try:
                producer.produce("memory", value=payload, on_delivery=lambda e, _m: e and errors.append(e))
                break
            except BufferError:
                producer.poll(0.1)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    assert errors == []

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "memory-test",
            "enable.auto.commit": False,
            "fetch.max.bytes": 16 << 20,
            "max.partition.fetch.bytes": 16 << 20,
        }
    )
    try:
        consumer.assign([TopicPartition("memory", 0, 0)])
        consumed = 0
        while consumed < COUNT:
            message = consumer.poll(10)
            assert message is not None, f"stalled after {consumed} messages"
            assert message.error() is None, message.error()
            consumed += 1
    finally:
        consumer.close()

    size_on_disk = sum(f.stat().st_size for f in (broker.data_dir / "memory-0").glob("*.log"))
    assert size_on_disk >= COUNT * MESSAGE
    peak = _peak_rss(broker.proc.pid)
    assert peak < RSS_LIMIT, f"broker peak RSS {peak / 2**20:.0f} MiB for a {size_on_disk / 2**20:.0f} MiB log"
