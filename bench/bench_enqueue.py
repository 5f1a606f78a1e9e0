"""The producer's per-record path without the network: ``await producer.enqueue(...)`` and
``RecordAccumulator.append`` in a loop, CPU time per record.

No broker: the producer is never entered (its sender never runs), its cluster is given a
metadata snapshot by hand (one topic, two partitions), and the batches it seals pile up and
are completed every 2,000 records, outside the timing. What is left is exactly what a record
costs between the application's ``await enqueue(...)`` and its handle: the checks, the
partitioner, the encode into the batch's buffer, the handle, and each batch's opening and
sealing. ``coroutine`` is the floor any ``await`` of an ``async def`` with ``enqueue``'s
signature pays; ``loop`` the benchmark's own loop. Figures are the best and the median of
``--repeat`` runs of ``--records`` records, in ns per record (``time.process_time``).

The last line puts ``enqueue`` and ``append`` beside the ``await`` of the empty coroutine, the
floor measured in the same run. Run from the repository root (a few seconds; ``--quick``,
10,000 records once, a smoke run)::

    .venv/bin/python -m bench.bench_enqueue [--quick] [--records N] [--repeat N] [--size BYTES] [--keyed]

To compare two commits, run it from each checkout in turn, alternating (the file reaches
only the producer's and the cluster's attributes it names below).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from tributary.client.producer.producer import Producer
from tributary.client.wire.metadata import ClusterMetadata, PartitionInfo, TopicInfo

CHUNK = 2_000
TOPIC = "t"


def _metadata() -> ClusterMetadata:
    partitions = {p: PartitionInfo(TOPIC, p, 1) for p in range(2)}
    return ClusterMetadata(topics={TOPIC: TopicInfo(TOPIC, partitions)})


def _give_metadata(producer: Producer, metadata: ClusterMetadata) -> None:
    cluster: Any = producer.cluster
    if isinstance(type(cluster).__dict__.get("metadata"), property):  # before branch producer-speed
        cluster._metadata = metadata
    else:
        cluster.metadata = metadata


async def _run(args: argparse.Namespace) -> dict[str, list[float]]:
    producer = Producer(
        "127.0.0.1:1", acks=1, enable_idempotence=False, batch_bytes=16384, linger_ms=5,
        buffer_memory=1 << 30, compression="none",
    )  # fmt: skip
    _give_metadata(producer, _metadata())
    values = [bytes([65 + i % 26]) * args.size for i in range(64)]
    keys = [b"user-%d" % i for i in range(1000)] if args.keyed else [None] * 1000
    accumulator: Any = producer._accumulator  # the producer's own, as enqueue appends to it
    await producer.enqueue(TOPIC, values[0])
    queues = producer._topics[TOPIC]
    enqueue, append = producer.enqueue, accumulator.append
    size = 10 + args.size + (len(keys[0]) if args.keyed else 0)

    def settle_all() -> None:
        for batch in list(accumulator.incomplete):
            accumulator.complete(batch)
        for queue in accumulator.active:
            queue.queue.clear()

    async def coroutine(topic: str, value: bytes | None = None, *, key: bytes | None = None, headers: Any = (),
                        partition: int | None = None, timestamp: int | None = None) -> None:  # fmt: skip
        return None

    async def loop(start: int) -> None:
        for i in range(start, start + CHUNK):
            values[i & 63]
            keys[i % 1000]

    async def loop_coroutine(start: int) -> None:
        for i in range(start, start + CHUNK):
            await coroutine(TOPIC, values[i & 63], key=keys[i % 1000])

    async def loop_append(start: int) -> None:
        for i in range(start, start + CHUNK):
            append(queues, None, keys[i % 1000], values[i & 63], (), None, size)

    async def loop_enqueue(start: int) -> None:
        for i in range(start, start + CHUNK):
            await enqueue(TOPIC, values[i & 63], key=keys[i % 1000])

    loops: dict[str, Callable[[int], Awaitable[None]]] = {
        "loop": loop, "coroutine": loop_coroutine, "append": loop_append, "enqueue": loop_enqueue,
    }  # fmt: skip
    results: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.repeat):
        for name, body in loops.items():
            settle_all()
            gc.collect()
            total = 0.0
            for start in range(0, args.records, CHUNK):
                before = time.process_time()
                await body(start)
                total += time.process_time() - before
                settle_all()
            results[name].append(total / args.records * 1e9)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 records, one run: a smoke run")
    parser.add_argument("--records", type=int, default=None, help="records per run (default 200,000)")
    parser.add_argument("--repeat", type=int, default=None, help="runs (default 7)")
    parser.add_argument("--size", type=int, default=200, help="value size in bytes (default 200)")
    parser.add_argument("--keyed", action="store_true", help="records with keys (murmur2 partitioner)")
    args = parser.parse_args(argv)
    if args.records is None:
        args.records = CHUNK * 5 if args.quick else 200_000
    if args.repeat is None:
        args.repeat = 1 if args.quick else 7
    if args.records < CHUNK or args.records % CHUNK or args.repeat < 1:
        parser.error(f"--records must be a multiple of {CHUNK:,}, --repeat at least 1")
    results = trio.run(_run, args)
    print(f"{args.size}-byte values{', keyed' if args.keyed else ''}; ns per record, best and median of {args.repeat}")
    for name, samples in results.items():
        print(f"  {name:<10} {min(samples):6.0f} {statistics.median(samples):6.0f}")
    floor = min(results["coroutine"])
    print(
        f"ratio to an empty coroutine's await: enqueue {min(results['enqueue']) / floor:.2f}x, "
        f"append {min(results['append']) / floor:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
