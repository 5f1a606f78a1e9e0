"""What the mirror benchmarks share: the copiers they run and how a copy is watched.

Every copier runs in a child process and copies one source topic whole into an aggregate
topic; :func:`watch_copy` times it from outside, the same way for each: it asks the
aggregate broker for the copy's end offsets every 50 ms (so watching costs the copier
nothing) and reads the copier's CPU time (all its threads, librdkafka's included) from
``/proc`` at the same instants (``processes.cpu_seconds``: nanoseconds per thread). The window
runs from the last sample before the first record reached the aggregate to the first sample
after the last one did. Within it, the samples at which a tenth and nine tenths of the records
had landed bound the sustained part of the copy: no start-up, no ramp, no tail.

The copiers:

* ``tributary mirror`` (:class:`MirrorDaemon`): raw batches, never decompressed;
* a consume-and-produce loop on confluent-kafka (``python -m bench.bench_mirror_peers
  confluent-copy ...``, :func:`confluent_copy_main`): what users run instead, librdkafka
  decompressing and recompressing in C as MirrorMaker does in Java, with Python touching
  each record once. Its settings are chosen so that the copier is measured, not a timer:
  local queues large enough never to stall it (``queued.min.messages``,
  ``queued.max.messages.kbytes``, ``queue.buffering.max.*``), ``fetch.queue.backoff.ms=0``
  (librdkafka otherwise backs its fetcher off for a second whenever its queue is full:
  FIELD-NOTES), linger 5 ms and the source's batch size, acks=all; fetch sizes and the
  long poll as the mirror's (``fetch.max.bytes`` 16 MiB, ``max.partition.fetch.bytes``
  2 MiB, ``fetch.wait.max.ms`` 250).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tributary.client.blocking import BlockingFetcher
from tributary.client.errors import KafkaError

from .processes import ROOT, Server, cpu_seconds

SAMPLE_INTERVAL = 0.05
COPY_TIMEOUT = 900.0
#: The client id prefix of every copier's connections (the link bench's proxy slows those only).
COPIER_CLIENT_PREFIX = "tributary-mirror-"

#: confluent-kafka's consumer and producer settings for the copy loop (see the module doc).
CONFLUENT_CONSUMER = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.max.bytes": 16 * 1024 * 1024,
    "max.partition.fetch.bytes": 2 * 1024 * 1024,
    "fetch.wait.max.ms": 250,
    "fetch.queue.backoff.ms": 0,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 1_048_576,
}
CONFLUENT_PRODUCER = {
    "compression.type": "zstd",
    "linger.ms": 5,
    "acks": "all",
    "queue.buffering.max.kbytes": 1_048_576,
    "queue.buffering.max.messages": 1_000_000,
}


@dataclass(frozen=True)
class Watched:
    """What :func:`watch_copy` saw over the copy window: its seconds, the copier's CPU seconds,
    and those of each process or thread it was asked to watch as well."""

    seconds: float
    cpu: float
    others: dict[str, float] = field(default_factory=dict)
    #: Seconds from the window's start until a tenth and nine tenths of the records had landed:
    #: between the two, the copy runs at its sustained rate (no ramp-up, no tail).
    tenth: float = 0.0
    nine_tenths: float = 0.0
    #: The copier's CPU seconds between those two samples, and the share of the records that
    #: landed between them (about eight tenths; exactly what the two samples saw).
    sustained_cpu: float = 0.0
    sustained_share: float = 0.0

    @property
    def sustained_seconds(self) -> float:
        """How long the middle eight tenths of the records took."""
        return self.nine_tenths - self.tenth


def thread_cpu_seconds(tid: int) -> float | None:
    """User + system CPU time of one thread of this process (``/proc/self/task/<tid>/stat``)."""
    try:
        with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def copied_records(fetcher: BlockingFetcher, topic: str) -> int:
    """Records in ``topic`` now (0 while it does not exist yet)."""
    try:
        return sum(end - start for start, end in fetcher.offset_bounds(topic).values())
    except KafkaError:
        return 0


def watch_copy(
    copier: Server, target: str, dest: str, total: int, *, others: Mapping[str, Callable[[], float | None]] = {}
) -> Watched:
    """Wait for ``dest`` on ``target`` to hold ``total`` records while ``copier`` copies; the
    window's length, the copier's CPU seconds over it, and those ``others`` report (each a
    function returning CPU seconds so far, None once gone)."""

    def sample() -> tuple[float, float, dict[str, float]]:
        used = cpu_seconds(copier.pid)
        if used is None:
            raise RuntimeError(f"the {copier.name} died:\n{copier.log_tail()}")
        return time.perf_counter(), used, {name: fn() or 0.0 for name, fn in others.items()}

    first: tuple[float, float, dict[str, float]] | None = None
    # fraction of the records -> (seconds into the window, CPU seconds, records) when first seen
    marks: dict[float, tuple[float, float, int]] = {}
    deadline = time.monotonic() + COPY_TIMEOUT
    with BlockingFetcher(target) as fetcher:
        while True:
            now = sample()
            records = copied_records(fetcher, dest)
            if records == 0 or first is None:
                first = now  # the last sample before copying began
            for fraction in (0.1, 0.9):
                if records >= fraction * total:
                    marks.setdefault(fraction, (now[0] - first[0], now[1], records))
            if records >= total:
                spent = {name: now[2][name] - first[2][name] for name in others}
                (tenth, tenth_cpu, tenth_records), (nine_tenths, late_cpu, late_records) = marks[0.1], marks[0.9]
                return Watched(
                    now[0] - first[0], now[1] - first[1], spent, tenth, nine_tenths,
                    late_cpu - tenth_cpu, (late_records - tenth_records) / total,
                )  # fmt: skip
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {copier.name} copied {records:,} of {total:,} records:\n{copier.log_tail()}")
            time.sleep(SAMPLE_INTERVAL)


class MirrorDaemon(Server):
    """``tributary mirror`` with its metrics endpoint on :attr:`port`; ``extra`` flags as given."""

    name = "mirror"

    def __init__(  # noqa: PLR0917 (the mirror's own flags, in their order)
        self,
        workdir: Path,
        source: str,
        target: str,
        alias: str,
        topics: str,
        extra: Sequence[str] = (),
        checkout: Path = ROOT,
    ) -> None:
        super().__init__(workdir)
        #: The checkout whose code runs (its ``tributary`` package first on the path).
        self.checkout = checkout
        self.args = [
            "mirror", "--source", source, "--source-alias", alias, "--target", target, "--topics", topics,
            "--metrics-port", str(self.port), "--metrics-host", "127.0.0.1", *extra,
        ]  # fmt: skip

    def start(self) -> MirrorDaemon:
        env = dict(os.environ, PYTHONPATH=str(self.checkout))
        self._spawn([sys.executable, "-m", "tributary.deploy.cli", *self.args], env)
        deadline = time.monotonic() + 60
        while "event=started" not in self.log_path.read_text(errors="replace"):
            if not self.alive():
                raise RuntimeError(f"the mirror exited while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the mirror did not start:\n{self.log_tail()}")
            time.sleep(0.1)
        return self

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
            return str(response.read().decode())


class ConfluentCopy(Server):
    """The confluent-kafka copy loop in a child process (see :func:`confluent_copy_main`)."""

    name = "confluent copy loop"

    def start(  # noqa: PLR0917 (the loop's command line, in its order)
        self, source: str, target: str, topic: str, dest: str, batch_bytes: int, ends: dict[int, int]
    ) -> None:
        self._spawn(
            [
                sys.executable, "-m", "bench.bench_mirror_peers", "confluent-copy", source, target, topic, dest,
                str(batch_bytes), json.dumps({str(p): end for p, end in ends.items()}),
            ],
            dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip

    def wait(self, timeout: float = COPY_TIMEOUT) -> None:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        if code != 0:
            raise RuntimeError(f"the confluent copy loop failed ({code}):\n{self.log_tail()}")


def confluent_copy_main(argv: Sequence[str]) -> int:
    """``confluent-copy SOURCE TARGET TOPIC DEST BATCH_BYTES ENDS_JSON``: copy every record of
    ``TOPIC`` below the given end offsets into the same partition of ``DEST``, with its key
    and timestamp, then flush."""
    from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: PLC0415 (a test extra)

    source, target, topic, dest, batch_bytes, ends_json = argv
    ends = {int(p): int(end) for p, end in json.loads(ends_json).items()}
    client_id = f"{COPIER_CLIENT_PREFIX}confluent-{dest}"
    consumer = Consumer(
        {"bootstrap.servers": source, "group.id": client_id, "client.id": client_id, **CONFLUENT_CONSUMER}
    )
    producer = Producer({
        "bootstrap.servers": target, "client.id": client_id, "batch.size": int(batch_bytes), **CONFLUENT_PRODUCER,
    })  # fmt: skip
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None and len(failures) < 5:
            failures.append(str(error))

    consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
    remaining = {p for p, end in ends.items() if end > 0}
    produce, poll = producer.produce, producer.poll
    while remaining:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is not None:
                raise RuntimeError(str(message.error()))
            partition, offset = message.partition(), message.offset()
            if partition is None or offset is None or partition not in remaining:
                continue
            while True:
                try:
                    produce(
                        dest, message.value(), message.key(), partition=partition,
                        timestamp=message.timestamp()[1], on_delivery=delivered,
                    )  # fmt: skip
                    break
                except BufferError:
                    poll(0.01)
            if offset + 1 >= ends[partition]:
                remaining.discard(partition)
        poll(0)
    left = producer.flush(120)
    consumer.close()
    if left or failures:
        raise RuntimeError(f"{left} records left unsent; errors: {failures}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["confluent-copy"]:
        return confluent_copy_main(argv[1:])
    raise SystemExit(
        "usage: python -m bench.bench_mirror_peers confluent-copy SOURCE TARGET TOPIC DEST BATCH_BYTES ENDS"
    )


if __name__ == "__main__":
    sys.exit(main())
