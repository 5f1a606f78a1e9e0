"""Reading both sides of a mirror and comparing them batch for batch."""

from __future__ import annotations

import json
from collections.abc import Callable

from confluent_kafka import Producer

from tributary.client.blocking import BlockingFetcher
from tributary.protocol.records import HEADER_SIZE, BatchHeader, iter_records
from tributary.testing.polling import eventually

Batch = tuple[BatchHeader, bytes]


def read_batches(bootstrap: str, topic: str) -> dict[int, list[Batch]]:
    """Every data batch (no transaction markers) of every partition, in order."""
    out: dict[int, list[Batch]] = {}
    with BlockingFetcher(bootstrap) as fetcher:
        for partition, (start, end) in sorted(fetcher.offset_bounds(topic).items()):
            batches: list[Batch] = []
            if end > start:
                for fetched in fetcher.fetch_range(topic, partition, start, end):
                    for header, data in fetched.batch_bytes():
                        wanted = header.next_offset > start and header.base_offset < end and not header.is_control
                        if wanted and (not batches or header.base_offset > batches[-1][0].base_offset):
                            batches.append((header, data))
            out[partition] = batches
    return out


def records_of(batches: list[Batch]) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for _, data in batches for r in iter_records(data)]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    with BlockingFetcher(bootstrap) as fetcher:
        return {p: end for p, (_, end) in fetcher.offset_bounds(topic).items()}


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, on_timeout: Callable[[], str] = str) -> None:
    eventually(predicate, timeout, what, interval=0.2, detail=on_timeout)


def copied_everything(source: str, target: str, alias: str, topic: str) -> bool:
    """Whether every aggregate partition holds as many records as its source partition."""
    try:
        src = read_batches(source, topic)
        dst = read_batches(target, f"{alias}.{topic}")
    except Exception:  # the topic may not exist yet
        return False
    return all(sum(h.record_count for h, _ in dst.get(p, [])) >= sum(h.record_count for h, _ in b)
               for p, b in src.items())  # fmt: skip


def assert_exact_copy(source: str, target: str, alias: str, topic: str) -> int:
    """The aggregate topic holds the source topic batch for batch: same partition, same
    order, byte-identical compressed records, every record once. Returns the record count."""
    src = read_batches(source, topic)
    dst = read_batches(target, f"{alias}.{topic}")
    assert sorted(dst) == sorted(src), f"partitions differ: {sorted(dst)} vs {sorted(src)}"
    total = 0
    for partition, src_batches in src.items():
        dst_batches = dst[partition]
        assert len(dst_batches) == len(src_batches), (
            f"{topic}-{partition}: {len(dst_batches)} aggregate batches for {len(src_batches)} source batches"
        )
        for (sh, sd), (dh, dd) in zip(src_batches, dst_batches, strict=True):
            assert dd[HEADER_SIZE:] == sd[HEADER_SIZE:], f"{topic}-{partition}: batch at {sh.base_offset} differs"
            assert (dh.record_count, dh.last_offset_delta, dh.base_timestamp, dh.compression) == (
                sh.record_count, sh.last_offset_delta, sh.base_timestamp, sh.compression)  # fmt: skip
        assert records_of(dst_batches) == records_of(src_batches)
        total += sum(h.record_count for h, _ in src_batches)
    return total


def produce_zstd(bootstrap: str, topic: str, count: int, *, start: int = 0, source: str = "src") -> None:
    """``count`` JSON records keyed by sequence number, zstd-compressed, through librdkafka."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 5,
                         "batch.num.messages": 500, "enable.idempotence": True})  # fmt: skip
    for i in range(start, start + count):
        value = json.dumps({"seq": i, "source": source, "page": f"/products/{i % 97}", "agent": "Mozilla/5.0"})
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value.encode())
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0, "records left unsent"
