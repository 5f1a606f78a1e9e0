"""The Spark loader against a single-process pyarrow baseline, per core; and local[2] against a
standalone Spark cluster.

    python -m bench.bench_loader [--quick] [--records N[,M]] [--rounds R] [--sizes 200,1024]
        [--contenders C,...] [--json]

One ZooKeeper and one Tributary broker; per record size (about 200 B and 1 KiB of JSON, zstd,
written by confluent-kafka) one mirrored-looking topic per volume (``east.bench-<records>``, 4
partitions). Each round every contender loads each volume's topic in full into a fresh
warehouse, the contenders taking turns (rotating who goes first):

* ``baseline``: ``bench/loader_baseline.py``, one plain Python process, no Spark: the same plan
  (the loader's own functions) and the same code per range as a Spark task runs
  (``loader.write.write_range``: fetch, decode into Arrow, write zstd Parquet with pyarrow);
* ``local[2]``: ``tributary load --master local[2]`` with the default writer (``auto``: the
  read tasks write with pyarrow on ``file://``), executors threads of the driver's JVM, Python
  workers its children;
* ``local[2] spark-writer``: the same with ``--writer spark`` (Spark's Parquet writer, then a
  job that reads the staged files back to describe them): what the loader did before;
* ``standalone``: the default writer on a standalone cluster of PySpark's own ``spark-class``
  master and two one-core workers (executors in JVMs of their own, the package shipped as an
  archive).

CPU is every process of a contender, sampled at its phase log lines (``cputree.py``: the load
process and its descendants; for ``standalone`` the cluster's daemons and executors too): Spark
start-up, planning, the read phase (reading, decoding and writing the ranges: the staging job),
then describing, publishing and committing, apart. Per core is records per CPU-second of the
read phase. A Spark job has a fixed cost whatever it reads (the Python workers' start and
imports, the JVM's compiler), so with two volumes (the default) the read phase's CPU is split
into a cost per record beyond the smaller load (marginal) and what is left at none (fixed):
the goal is local[2]'s marginal per core at least 0.8x the baseline's, with the fixed cost
shown beside it, as start-up and planning are. Wall-clock records/s are printed too. After
each load the warehouses of the contenders are read back and compared: per partition the same
rows, offsets and value bytes.

``--quick`` (a smoke run a test executes): 200 B, one volume of 5,000 records, one round,
baseline and local[2]; it takes 30-60 s (a Spark session alone starts in 5-15 s here).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench.common import log, machine_line, table
from bench.cputree import TreeCpu
from bench.processes import Tributary, ZooKeeper
from tests.loader.spark_standalone import SparkStandalone, spark_standalone

TOPIC = "east.bench"
PARTITIONS = 4
MAX_RECORDS_PER_TASK = 250_000
GOAL = 0.8
DEFAULT_VOLUMES = "250000,1000000"
QUICK_VOLUME = 5_000
BASELINE, LOCAL, LOCAL_SPARK_WRITER, STANDALONE = "baseline", "local[2]", "local[2] spark-writer", "standalone"
CONTENDERS = (BASELINE, LOCAL, LOCAL_SPARK_WRITER, STANDALONE)

#: Phase log lines: the loader's (job.py) and the baseline's; each ends the phase it names.
_MARKS = (
    ("startup", re.compile(r"Spark session on \S+ started in")),
    ("plan", re.compile(r"planned \d+ ranges")),
    ("read", re.compile(r"\d+ ranges read and (?:staged|written) in")),
    ("finish", re.compile(r"run \S+: committed")),
)


def produce(bootstrap: str, topic: str, records: int, size: int) -> None:
    from confluent_kafka import Producer  # noqa: PLC0415 (a test extra)
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    pad = "x" * max(0, size - 120)
    now = int(time.time() * 1000)
    for i in range(records):
        value = f'{{"event":"page_view","user":"u{i % 9973}","url":"/p/{i % 313}","n":{i},"pad":"{pad}"}}'
        while True:
            try:
                producer.produce(topic, value.encode(), key=b"u%d" % (i % 9973), timestamp=now + i // 100)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise SystemExit("the producer could not deliver every record")


@dataclass
class Run:
    """One load: wall seconds and CPU seconds per phase, and the total."""

    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    #: The read phase's CPU seconds per command name (java: the JVM; python: driver and workers).
    read_by_command: dict[str, float] = field(default_factory=dict)
    total_wall: float = 0.0


def timed_load(command: Sequence[str], env: dict[str, str], extra_roots: Sequence[int] = ()) -> Run:
    """Run a load command, sampling the CPU of its process tree at each phase line."""
    started = time.monotonic()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    cpu = TreeCpu([proc.pid, *extra_roots])
    last = cpu.by_command()
    run, last_wall, tail = Run(), started, []
    assert proc.stderr is not None
    for line in proc.stderr:
        tail = [*tail[-40:], line]
        for phase, pattern in _MARKS:
            if phase not in run.wall and pattern.search(line):
                now, used = time.monotonic(), cpu.by_command()
                run.wall[phase], run.cpu[phase] = now - last_wall, sum(used.values()) - sum(last.values())
                if phase == "read":
                    run.read_by_command = {
                        name: round(seconds - last.get(name, 0.0), 2) for name, seconds in used.items()
                    }
                last_wall, last = now, used
    if proc.wait(timeout=1800) != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed:\n{''.join(tail)}")
    run.total_wall = time.monotonic() - started
    if "read" not in run.cpu:
        raise SystemExit(f"no phase log in the output of {' '.join(command[:4])} ...:\n{''.join(tail)}")
    return run


def load(contender: str, bootstrap: str, topic: str, warehouse: Path, spark: SparkStandalone | None) -> Run:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    common = [
        "--bootstrap",
        bootstrap,
        "--topics",
        re.escape(topic),
        "--max-records-per-task",
        str(MAX_RECORDS_PER_TASK),
    ]
    if contender == BASELINE:
        return timed_load([sys.executable, "-m", "bench.loader_baseline", *common, "--output", str(warehouse)], env)
    master = spark.url if contender == STANDALONE and spark is not None else LOCAL
    writer = "spark" if contender == LOCAL_SPARK_WRITER else "auto"
    command = [sys.executable, "-m", "tributary.deploy.cli", "load", *common, "--output", warehouse.as_uri(),
               "--master", master, "--writer", writer]  # fmt: skip
    daemons = [p.pid for p in spark.processes] if contender == STANDALONE and spark is not None else []
    return timed_load(command, env, daemons)


def fingerprint(warehouse: Path) -> tuple[tuple[object, ...], ...]:
    """Per partition of a warehouse's Parquet files: rows, first and last offset, the sum of the
    offsets and the value bytes (the loaded Parquet read back)."""
    data = ds.dataset(warehouse, format="parquet", partitioning="hive").to_table(
        columns=["partition", "offset", "value"]
    )
    data = data.append_column("value_bytes", pc.binary_length(data.column("value")))
    grouped = data.group_by("partition").aggregate(
        [("offset", "count"), ("offset", "min"), ("offset", "max"), ("offset", "sum"), ("value_bytes", "sum")]
    )
    return tuple(sorted(tuple(row.values()) for row in grouped.to_pylist()))


#: contender -> volume (records) -> one Run per round
Runs = dict[str, dict[int, list[Run]]]


def topic_of(volume: int) -> str:
    return f"{TOPIC}-{volume}"


def run_shape(  # noqa: PLR0917
    bootstrap: str, spark: SparkStandalone | None, contenders: Sequence[str], volumes: Sequence[int], rounds: int,
    work: Path,
) -> Runs:  # fmt: skip
    """Every contender loads every volume's topic once per round (contenders rotating who goes
    first); their warehouses must hold the same records."""
    runs: Runs = {c: {v: [] for v in volumes} for c in contenders}
    for n in range(rounds):
        for volume in volumes:
            prints: dict[str, tuple[tuple[object, ...], ...]] = {}
            for i in range(len(contenders)):
                contender = contenders[(n + i) % len(contenders)]
                warehouse = work / f"{re.sub(r'[^a-z]+', '-', contender)}-{volume}-{n}"
                run = load(contender, bootstrap, topic_of(volume), warehouse, spark)
                runs[contender][volume].append(run)
                prints[contender] = fingerprint(warehouse)
                rows = sum(int(str(p[1])) for p in prints[contender])
                log(f"  round {n + 1}, {volume:,} records: {contender:<10} read phase {run.wall['read']:.1f} s wall, "
                    f"{run.cpu['read']:.1f} CPU-s {run.read_by_command}; {rows:,} rows")  # fmt: skip
            if len(set(prints.values())) != 1:
                raise SystemExit(
                    f"the contenders' warehouses differ (per partition: rows, offsets, value bytes): {prints}"
                )
    return runs


def summarize(runs: Runs) -> dict[str, Any]:
    """Per contender: per volume the medians of every phase; with two volumes, the read phase's
    cost per record beyond the smaller volume (marginal) and what is left of it at none (fixed)."""
    out: dict[str, Any] = {}
    for contender, by_volume in runs.items():
        volumes = sorted(by_volume)
        row: dict[str, Any] = {"volumes": {}}
        for volume in volumes:
            rs = by_volume[volume]
            v: dict[str, Any] = {
                "rounds": len(rs),
                "records_per_s": statistics.median(volume / r.wall["read"] for r in rs),
                "records_per_cpu_s": statistics.median(volume / max(r.cpu["read"], 1e-9) for r in rs),
                "cores": statistics.median(r.cpu["read"] / r.wall["read"] for r in rs),
                "total_wall": statistics.median(r.total_wall for r in rs),
                "read_by_command": {
                    name: statistics.median(r.read_by_command.get(name, 0.0) for r in rs)
                    for name in sorted({n for r in rs for n in r.read_by_command})
                },
            }
            for phase in ("startup", "plan", "read", "finish"):
                if all(phase in r.cpu for r in rs):
                    v[f"{phase}_wall"] = statistics.median(r.wall[phase] for r in rs)
                    v[f"{phase}_cpu"] = statistics.median(r.cpu[phase] for r in rs)
            if contender != BASELINE and BASELINE in runs:
                v["per_core_vs_baseline"] = statistics.median(
                    b.cpu["read"] / max(r.cpu["read"], 1e-9) for r, b in zip(rs, runs[BASELINE][volume], strict=True)
                )
            row["volumes"][volume] = v
        if len(volumes) == 2:
            small, large = volumes
            marginals = [
                (b.cpu["read"] - a.cpu["read"]) / (large - small)
                for a, b in zip(by_volume[small], by_volume[large], strict=True)
            ]
            row["marginal_us"] = statistics.median(marginals) * 1e6
            row["fixed_cpu"] = statistics.median(
                a.cpu["read"] - small * m for a, m in zip(by_volume[small], marginals, strict=True)
            )
        out[contender] = row
    if BASELINE in out:
        base = out[BASELINE].get("marginal_us")
        for contender, row in out.items():
            # A marginal at or below zero (the larger load's read phase cost no more than the
            # smaller's) is noise larger than the difference: no ratio is made of it.
            if contender != BASELINE and base and base > 0 and row.get("marginal_us", 0) > 0:
                row["marginal_vs_baseline"] = base / row["marginal_us"]
    return out


def render(document: dict[str, Any]) -> str:
    volumes = document["volumes"]
    lines = [
        "Loader: Spark (local[2], standalone) vs one plain Python process with pyarrow (baseline)",
        machine_line(),
        f"{' and '.join(f'{v:,}' for v in volumes)} records per shape, {document['rounds']} round(s), {PARTITIONS} "
        f"partitions, zstd; ranges of at most {MAX_RECORDS_PER_TASK:,} records; medians over rounds",
        "read = reading, decoding and writing the ranges (Spark: the staging job), every process counted (driver,",
        "JVMs, Python workers; not the broker); per core = records per CPU-second of the read phase; start-up",
        "(the Spark session), plan and finish (describe, publish, commit) apart, as wall s / CPU s",
        "",
    ]
    rows = []
    for shape, result in document["shapes"].items():
        first = True
        for contender, r in result.items():
            for volume, v in r["volumes"].items():
                ratio = v.get("per_core_vs_baseline")

                def phase(name: str, v: dict[str, Any] = v) -> str:
                    return f"{v[name + '_wall']:.1f} / {v[name + '_cpu']:.1f}" if name + "_wall" in v else "-"

                rows.append([shape if first else "", contender, f"{int(volume):,}", f"{v['records_per_s']:,.0f}",
                             f"{v['records_per_cpu_s']:,.0f}", f"{v['cores']:.2f}",
                             f"{ratio:.2f}x" if ratio is not None else "-", phase("startup"), phase("plan"),
                             phase("read"), phase("finish"), f"{v['total_wall']:.1f}"])  # fmt: skip
                first = False
    header = ["shape", "contender", "records", "records/s", "per core", "cores", "vs baseline", "start-up",
              "plan", "read", "finish", "run s"]  # fmt: skip
    lines.append(table(header, rows, left=2))
    if len(volumes) == 2:
        lines += ["", f"read phase from {volumes[0]:,} to {volumes[1]:,} records: CPU per record beyond the "
                  "smaller load (marginal) and what is left at none (fixed)"]  # fmt: skip
        rows = []
        for shape, result in document["shapes"].items():
            for i, (contender, r) in enumerate(result.items()):
                ratio = r.get("marginal_vs_baseline")
                per_core = f"{1e6 / r['marginal_us']:,.0f}" if r["marginal_us"] > 0 else "- (noise)"
                rows.append([shape if i == 0 else "", contender, f"{r['marginal_us']:.2f}", per_core,
                             f"{ratio:.2f}x" if ratio else "-", f"{r['fixed_cpu']:.1f}"])  # fmt: skip
        header = ["shape", "contender", "CPU us/record", "per core (marginal)", "vs baseline", "fixed CPU s"]
        lines.append(table(header, rows, left=2))
    lines.append("")
    lines += ratio_lines(document)
    return "\n".join(lines)


def ratio_lines(document: dict[str, Any]) -> list[str]:
    """Per shape: local[2] (and standalone) per core against the baseline, and the goal: the
    marginal figure when two volumes were loaded, else the read phase's as a whole."""
    lines = []
    volumes = document["volumes"]
    for shape, result in document["shapes"].items():
        for contender in (LOCAL, LOCAL_SPARK_WRITER, STANDALONE):
            r = result.get(contender)
            if r is None or BASELINE not in result:
                continue
            if "marginal_vs_baseline" in r:
                ratio = r["marginal_vs_baseline"]
                how = (f"marginal, {volumes[0]:,} to {volumes[1]:,} records; fixed {r['fixed_cpu']:.1f} CPU-s "
                       f"against {result[BASELINE]['fixed_cpu']:.1f}")  # fmt: skip
            else:
                ratio = r["volumes"][volumes[-1]]["per_core_vs_baseline"]
                how = f"the read phase of {volumes[-1]:,} records, fixed costs included"
                if "marginal_us" in r:
                    how += " (the marginal cost was lost in noise: load more records)"
            goal = f"; goal {GOAL}x {'met' if ratio >= GOAL else 'NOT met'}" if contender == LOCAL else ""
            lines.append(f"ratio {shape}: {contender} per core vs baseline {ratio:.2f}x ({how}{goal})")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 B, 5,000 records, baseline and local[2]")
    parser.add_argument("--records", default=None,
                        help=f"one or two loads' records (default {DEFAULT_VOLUMES}; {QUICK_VOLUME} quick)",
                        )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=None, help="rounds per shape (default 2; 1 quick)")
    parser.add_argument("--sizes", default=None, help="record sizes, comma-separated (default 200,1024; 200 quick)")
    parser.add_argument("--contenders", default=None,
                        help=f"any of {', '.join(CONTENDERS)} (default all; baseline and local[2] quick)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    volumes = sorted(
        {int(v) for v in (args.records or (str(QUICK_VOLUME) if args.quick else DEFAULT_VOLUMES)).split(",")}
    )
    rounds = args.rounds or (1 if args.quick else 2)
    sizes = [int(s) for s in (args.sizes or ("200" if args.quick else "200,1024")).split(",")]
    chosen = args.contenders or (f"{BASELINE},{LOCAL}" if args.quick else ",".join(CONTENDERS))
    contenders = [c.strip() for c in chosen.split(",") if c.strip()]
    if set(contenders) - set(CONTENDERS) or not contenders:
        parser.error(f"unknown contenders in {chosen!r} (known: {', '.join(CONTENDERS)})")
    if len(volumes) > 2 or min(volumes) < 1:
        parser.error("--records takes one or two positive counts")
    shapes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp:
        work = Path(tmp)
        (work / "spark").mkdir()
        with spark_standalone(work / "spark", workers=2) if STANDALONE in contenders else nullcontext() as spark:
            for size in sizes:
                zookeeper = ZooKeeper(work / f"zk-{size}").start()
                broker = Tributary(work / f"broker-{size}", zookeeper).start()
                try:
                    for volume in volumes:
                        log(f"producing {volume:,} records of about {size} B into {topic_of(volume)}")
                        produce(broker.bootstrap, topic_of(volume), volume, size)
                    runs = run_shape(broker.bootstrap, spark, contenders, volumes, rounds, work / f"runs-{size}")
                    shapes[f"{size} B"] = summarize(runs)
                finally:
                    broker.stop()
                    zookeeper.stop()
    document = {"machine": machine_line(), "volumes": volumes, "rounds": rounds, "shapes": shapes}
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
