"""bench/bench_broker.py's per-request figures: the Produce requests counted from librdkafka's
statistics against a real broker, and the broker CPU per request they give in the summary and
the table. (The bench itself needs Tansu, fetched from PyPI on first use: not run here.)"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bench import bench_broker, common
from tributary.client.blocking import BlockingFetcher
from tributary.testing.cluster import Cluster

VALUES = [b"x" * 200, b"y" * 200]


def _topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30).values():
        future.result(timeout=60)


def test_produce_requests_are_counted_as_librdkafka_sent_them(single_broker: Cluster) -> None:
    bootstrap = single_broker.bootstrap
    _topic(bootstrap, "counted")
    config = {"acks": 1, "enable.idempotence": False, "linger.ms": 0, "batch.num.messages": 1}
    seconds, requests = common.confluent_produce_counted(bootstrap, "counted", VALUES, 120, config, label="t")
    assert seconds > 0
    assert requests == 120  # one message per request, none retried on a healthy broker
    # Batched: as many requests as batches, at most 20 messages in each.
    config = {**config, "linger.ms": 20, "batch.num.messages": 20}
    _, requests = common.confluent_produce_counted(bootstrap, "counted", VALUES, 120, config, label="t")
    assert 6 <= requests < 120


def test_the_summary_and_table_give_cpu_per_request() -> None:
    run = bench_broker.Run(bench_broker.Sizes.pick(True, None), None, None, set(), None, None)  # type: ignore[arg-type]
    shape = run.shape("produce-batch50")
    # two rounds each: 50 messages per request; the broker's CPU per request is 200 and 400 us
    for cpu in (0.002, 0.004):
        shape.add("tributary", bench_broker.Sample(1.0, 500, 100_000, broker_cpu=cpu, requests=10))
    for cpu in (0.001, 0.001):
        shape.add("tansu", bench_broker.Sample(2.0, 500, 100_000, broker_cpu=cpu, requests=10))
    result = bench_broker.summary(run)
    ours = result["shapes"]["produce-batch50"]["contenders"]["tributary"]
    assert ours["broker_cpu_us_per_request"] == pytest.approx(300.0)
    assert ours["msgs_per_request"] == 50.0
    assert ours["ratio_to_tansu"] == 2.0
    assert result["goals"]["produce-batch50"] == {"ratio": 2.0, "target": 2.0, "met": True}
    document = {
        "machine": {"date": "d", "cpus": 2, "cpu": "c", "python": "p", "os": "o"},
        "versions": {"confluent-kafka": "k", "tansu": "t", "tributary": "r"},
        "sizes": run.sizes.__dict__,
        **result,
    }
    table = bench_broker.render(document)
    assert "CPU/req" in table
    row = next(line for line in table.splitlines() if line.startswith("produce-batch50"))
    assert "300.0" in row and "50.0" in row and "2.00x" in row


def test_lone_requests_are_answered_one_at_a_time(single_broker: Cluster) -> None:
    # produce-lone's driver: each request appended (one record each) and answered before the next.
    _topic(single_broker.bootstrap, "lone")
    sample = bench_broker.lone_produce(single_broker.brokers[0].port, "lone", VALUES[0], 50)
    assert (sample.messages, sample.requests, sample.nbytes) == (50, 50, 50 * 200)
    with BlockingFetcher(single_broker.bootstrap) as fetcher:
        assert fetcher.offset_bounds("lone") == {0: (0, 50)}
