"""What the benchmarks share: paired timing, summaries, tables, the machine.

The machine is shared and drifts, so every figure is taken next to a peer:
:func:`paired_rounds` times the contenders once each per round, rotating who
goes first, and ratios are the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Settings:
    quick: bool
    #: The time budget of one comparison (all its contenders), in seconds.
    seconds: float
    #: A fixed number of rounds instead of the budget, when given.
    repeat: int | None
    json: bool
    #: The least time one timed call should take, so the clock's grain and
    #: the loop around it stay negligible.
    min_round_seconds: float


def add_arguments(parser: argparse.ArgumentParser, *, default_seconds: float, quick_seconds: float) -> None:
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (a few seconds in all)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help=f"time budget per comparison (default {default_seconds}, {quick_seconds} with --quick)",
    )
    parser.add_argument("--repeat", type=int, default=None, help="a fixed number of timed rounds per comparison")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def add_process_arguments(parser: argparse.ArgumentParser, py_spy_help: str) -> None:
    """The options of the benchmarks that start processes: ``--keep``, ``--py-spy DIR`` and
    ``--from-json FILE`` (print the tables of an earlier ``--json`` run; see :func:`replayed`)."""
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, data)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR", help=py_spy_help)
    parser.add_argument(
        "--from-json", type=Path, default=None, metavar="FILE", help="print the tables of a --json file"
    )


def replayed(args: argparse.Namespace, render: Callable[[Any], str]) -> bool:
    """Whether ``--from-json`` was given; if so its tables are printed."""
    if args.from_json is None:
        return False
    print(render(json.loads(args.from_json.read_text())))
    return True


def confluent_produce(
    bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any], *, label: str
) -> float:
    """Seconds librdkafka (confluent-kafka) takes to send ``count`` of ``values`` in turn and
    flush, with its queues large enough never to be what is measured; connecting and the
    topic's metadata are not timed. Raises if a message was not delivered."""
    return _confluent_produce(bootstrap, topic, values, count, config, label=label, count_requests=False)[0]


def confluent_produce_counted(
    bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any], *, label: str
) -> tuple[float, int]:
    """:func:`confluent_produce`, and how many Produce requests librdkafka sent for it (its
    statistics, ``brokers.*.req.Produce``): what per-request figures divide by, counted the same
    way whichever broker answers."""
    seconds, requests, _, _ = _confluent_produce(
        bootstrap, topic, values, count, config, label=label, count_requests=True
    )
    assert requests is not None
    return seconds, requests


def confluent_produce_parallel(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    count: int,
    config: dict[str, Any],
    *,
    label: str,
    producers: int,
) -> tuple[float, int, float]:
    """:func:`confluent_produce_counted` split over ``producers`` processes, each with its own
    librdkafka producer and ``count / producers`` messages: one client's pipeline (its request
    window, its Python loop) is then no longer what holds the broker back. The children connect
    first and start together. Returns the seconds from the first start to the last flush (the
    system's monotonic clock, which every process shares), the requests they sent and the CPU
    seconds they used from their start to their flush (all their threads)."""
    import multiprocessing  # noqa: PLC0415 (only this path starts processes)

    context = multiprocessing.get_context("spawn")  # librdkafka is not fork-safe
    start = context.Barrier(producers)
    results = context.Queue()
    shares = [count // producers + (1 if i < count % producers else 0) for i in range(producers)]
    children = [
        context.Process(
            target=_produce_child,
            args=(bootstrap, topic, list(values), share, config, f"{label}-{i}", start, results),
            daemon=True,
        )
        for i, share in enumerate(shares)
    ]
    for child in children:
        child.start()
    try:
        outcomes = [results.get(timeout=600) for _ in children]
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join()
    failed = [o for o in outcomes if isinstance(o, str)]
    if failed:
        raise RuntimeError(f"{label}: {'; '.join(failed)}")
    begun = min(o[0] for o in outcomes)
    ended = max(o[1] for o in outcomes)
    return ended - begun, sum(o[2] for o in outcomes), sum(o[3] for o in outcomes)


def _produce_child(  # noqa: PLR0917 (a process target takes its arguments by position)
    bootstrap: str,
    topic: str,
    values: list[bytes],
    count: int,
    config: dict[str, Any],
    label: str,
    start: Any,
    results: Any,
) -> None:
    cpu_at_start = 0.0

    def wait_for_the_others() -> None:
        nonlocal cpu_at_start
        start.wait()
        cpu_at_start = client_cpu()

    try:
        _, requests, begun, ended = _confluent_produce(
            bootstrap, topic, values, count, config, label=label, count_requests=True, before_start=wait_for_the_others
        )
        results.put((begun, ended, requests, client_cpu() - cpu_at_start))
    except BaseException as exc:  # reported to the parent, which raises it
        results.put(f"{label}: {exc!r}")


#: How often librdkafka emits its statistics while Produce requests are counted (a JSON
#: document a few times a second costs the client next to nothing).
STATISTICS_MS = 200


def _confluent_produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    count: int,
    config: dict[str, Any],
    *,
    label: str,
    count_requests: bool,
    before_start: Callable[[], object] | None = None,
) -> tuple[float, int | None, float, float]:
    """Seconds, requests, and the perf_counter at the start and at the end of the timed part."""
    from confluent_kafka import Producer  # noqa: PLC0415 (a test extra)

    errors: list[str] = []
    produce_requests: list[int] = []  # from each statistics document, in order

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    def on_statistics(document: str) -> None:
        brokers = json.loads(document).get("brokers", {}).values()
        produce_requests.append(sum(b.get("req", {}).get("Produce", 0) for b in brokers))

    extra: dict[str, Any] = (
        {"statistics.interval.ms": STATISTICS_MS, "stats_cb": on_statistics} if count_requests else {}
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "delivery.report.only.error": True,
            "on_delivery": delivered,
            **extra,
            **config,
        }
    )
    producer.list_topics(topic, timeout=10)  # connected, metadata known: not timed
    send, poll, n = producer.produce, producer.poll, len(values)
    if before_start is not None:
        before_start()
    start = time.perf_counter()
    for i in range(count):
        value = values[i % n]
        try:
            send(topic, value)
        except BufferError:  # the queue is full (queue.buffering.max.*): wait for room
            while True:
                poll(0.01)
                try:
                    send(topic, value)
                    break
                except BufferError:
                    continue
    left = producer.flush(120)
    ended = time.perf_counter()
    seconds = ended - start
    requests = None
    if count_requests:
        # Statistics emitted after the flush count every request (none is in flight): wait
        # for one (not timed).
        produce_requests.clear()
        deadline = time.monotonic() + 10 * STATISTICS_MS / 1000
        while not produce_requests and time.monotonic() < deadline:
            poll(STATISTICS_MS / 1000)
        if not produce_requests:
            raise RuntimeError(f"{label}: librdkafka emitted no statistics after the flush")
        requests = produce_requests[-1]
    del producer
    if left or errors:
        raise RuntimeError(f"{label}: {left} messages undelivered; errors: {errors}")
    return seconds, requests, start, ended


def settings(args: argparse.Namespace, *, default_seconds: float, quick_seconds: float) -> Settings:
    seconds = args.seconds if args.seconds is not None else quick_seconds if args.quick else default_seconds
    if args.repeat is not None and args.repeat < 1:
        raise SystemExit("--repeat must be at least 1")
    return Settings(
        quick=args.quick,
        seconds=seconds,
        repeat=args.repeat,
        json=args.json,
        min_round_seconds=0.0002 if args.quick else 0.005,
    )


def calibrate(fn: Callable[[int], object], min_seconds: float) -> int:
    """How many iterations ``fn(n)`` needs to take at least ``min_seconds``
    (after one warm-up call)."""
    fn(1)
    n = 1
    while True:
        start = time.perf_counter()
        fn(n)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return n
        n = max(n + 1, math.ceil(n * min_seconds * 1.2 / max(elapsed, 1e-9)))


def paired_rounds(
    fns: Sequence[Callable[[], object]],
    *,
    seconds: float,
    repeat: int | None,
    min_rounds: int = 5,
    max_rounds: int = 10_000,
) -> list[list[float]]:
    """Times each of ``fns`` once per round, rotating the order from round to
    round; returns each function's times. One untimed warm-up round first.
    Runs ``repeat`` rounds, or else until ``seconds`` have passed (and at
    least ``min_rounds``)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    deadline = time.perf_counter() + seconds
    rounds = 0
    while True:
        for i in range(len(fns)):
            which = (rounds + i) % len(fns)
            start = time.perf_counter()
            fns[which]()
            times[which].append(time.perf_counter() - start)
        rounds += 1
        if repeat is not None:
            if rounds >= repeat:
                return times
        elif rounds >= max_rounds or (rounds >= min_rounds and time.perf_counter() >= deadline):
            return times


@dataclass(frozen=True)
class Rate:
    """A throughput summarised over rounds: work units per second."""

    median: float
    best: float
    rounds: int


def rate(work: float, times: Sequence[float]) -> Rate:
    return Rate(median=work / statistics.median(times), best=work / min(times), rounds=len(times))


def paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> float:
    """Throughput of ours over theirs: the median of the per-round ratios."""
    return statistics.median(t / o for o, t in zip(ours, theirs, strict=True))


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    """A fixed-width table; the first ``left`` columns are left-aligned, the rest right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), line(["-" * width for width in widths]), *(line(row) for row in rows)])


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for entry in cpuinfo:
                if entry.startswith("model name"):
                    return entry.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": str(os.cpu_count()),
        "cpu": cpu_model(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}",
    }


def machine_line() -> str:
    m = machine()
    return f"{m['date']}; {m['cpus']} CPUs ({m['cpu']}); {m['python']}; {m['os']}"


__all__ = [
    "Rate",
    "Settings",
    "add_arguments",
    "calibrate",
    "machine",
    "machine_line",
    "paired_ratio",
    "paired_rounds",
    "rate",
    "settings",
    "table",
]


def log(message: str) -> None:
    """A progress line on stderr, so tables on stdout stay clean."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def client_cpu() -> float:
    """CPU seconds this process (the benchmark's client side) has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
