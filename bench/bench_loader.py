"""The Spark load on one machine's local[2] against a standalone Spark cluster of two workers.

    python -m bench.bench_loader [--quick] [--records N] [--rounds R]

One ZooKeeper and one Tributary broker hold a mirrored-looking topic (``east.bench``, 4
partitions, zstd JSON of about 200 B and 1 KiB per record). Each round loads it in full into a
fresh warehouse twice: once with ``--master local[2]`` (executors are threads of the driver's JVM,
Python workers its children) and once on a standalone cluster made of PySpark's own
``spark-class`` master and two workers of one core each (executors in JVMs of their own, the
package shipped to them as an archive), alternating which goes first. Printed per shape: records/s
of the read-and-stage phase (the loader's own phase log), the Spark session start, the whole run,
and the cluster's cost as a ratio to local[2] from the same rounds.
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
from pathlib import Path

from bench.common import log, machine_line, table
from bench.processes import Tributary, ZooKeeper
from tests.loader.spark_standalone import spark_standalone

TOPIC = "east.bench"
_SESSION = re.compile(r"Spark session on \S+ started in ([\d.]+) s")
_STAGED = re.compile(r"(\d+) ranges read and staged in ([\d.]+) s")


def produce(bootstrap: str, records: int, size: int) -> None:
    from confluent_kafka import Producer  # noqa: PLC0415 (a test extra)
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 4, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    pad = "x" * max(0, size - 120)
    now = int(time.time() * 1000)
    for i in range(records):
        value = f'{{"event":"page_view","user":"u{i % 9973}","url":"/p/{i % 313}","n":{i},"pad":"{pad}"}}'
        while True:
            try:
                producer.produce(TOPIC, value.encode(), key=b"u%d" % (i % 9973), timestamp=now + i // 100)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise SystemExit("the producer could not deliver every record")


def load(bootstrap: str, master: str, warehouse: Path) -> dict[str, float]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "load", "--bootstrap", bootstrap, "--output",
         warehouse.as_uri(), "--master", master, "--max-records-per-task", "250000"],
        capture_output=True, text=True, env=env, check=False, timeout=1800,
    )
    total = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"the load on {master} failed:\n{result.stderr[-3000:]}")
    session, staged = _SESSION.search(result.stderr), _STAGED.search(result.stderr)
    if session is None or staged is None:
        raise SystemExit(f"no phase log in the load's output:\n{result.stderr[-3000:]}")
    return {"session": float(session[1]), "read": float(staged[2]), "total": total}


Runs = dict[str, list[dict[str, float]]]


def run_shape(bootstrap: str, spark_url: str, records: int, rounds: int, work: Path) -> Runs:
    runs: Runs = {"local[2]": [], "standalone": []}
    for n in range(rounds):
        order = [("local[2]", "local[2]"), ("standalone", spark_url)]
        for label, master in order if n % 2 == 0 else reversed(order):
            warehouse = work / f"wh-{label.strip('[]2')}-{n}"
            runs[label].append(load(bootstrap, master, warehouse))
            log(f"  round {n + 1}: {label} read {records / runs[label][-1]['read']:,.0f} records/s")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--records", type=int, default=None, help="records per shape (default 400,000; 20,000 quick)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per shape (default 2; 1 quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    records = args.records or (20_000 if args.quick else 400_000)
    rounds = args.rounds or (1 if args.quick else 2)
    results: dict[str, Runs] = {}
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp:
        work = Path(tmp)
        (work / "spark").mkdir()
        with spark_standalone(work / "spark", workers=2) as spark:
            for size in (200, 1024):
                zookeeper = ZooKeeper(work / f"zk-{size}").start()
                broker = Tributary(work / f"broker-{size}", zookeeper).start()
                try:
                    log(f"producing {records:,} records of about {size} B")
                    produce(broker.bootstrap, records, size)
                    runs = run_shape(broker.bootstrap, spark.url, records, rounds, work / f"runs-{size}")
                    results[f"{size} B"] = runs
                finally:
                    broker.stop()
                    zookeeper.stop()
    if args.json:
        print(json.dumps({"records": records, "rounds": rounds, "results": results}, indent=2))
        return
    rows = []
    for shape, runs in results.items():
        med = {label: {k: statistics.median(r[k] for r in rs) for k in ("session", "read", "total")}
               for label, rs in runs.items()}
        for label in ("local[2]", "standalone"):
            m = med[label]
            rows.append([shape, label, f"{records / m['read']:,.0f}", f"{records / m['read'] / 2:,.0f}",
                         f"{m['session']:.1f}", f"{m['total']:.1f}",
                         "" if label == "local[2]" else f"{m['read'] / med['local[2]']['read']:.2f}x"])
    print(machine_line())
    print(f"{records:,} records per shape, {rounds} round(s), 4 partitions, zstd; median of rounds")
    print(table(["shape", "master", "records/s", "per core", "session s", "run s", "read time vs local[2]"], rows))


if __name__ == "__main__":
    main()
