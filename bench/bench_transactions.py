"""What transactions cost a producer: 100 records per transaction against none, in one run.

One ZooKeeper and three Tributary brokers on loopback; a topic of three partitions, replication
factor 3, ``min.insync.replicas`` 2, its leaders on the three brokers. confluent-kafka sends the
same 200-byte JSON events, with the same settings (acks=all, linger.ms 5), along each path:

* ``idempotent``: ``enable.idempotence`` (what a transactional producer is underneath), no
  transactions: the baseline;
* ``transactional, 100/txn``: ``transactional.id``; begin, 100 records, commit, again. Each
  transaction costs AddPartitionsToTxn before the first record of each partition, and EndTxn,
  which the coordinator answers once its decision is in ``__transaction_state``'s replicas; the
  next transaction's AddPartitionsToTxn waits until the markers of the last are in every
  partition (the client retries CONCURRENT_TRANSACTIONS);
* ``transactional, 1000/txn``: the same with ten times as many records per transaction;
* ``idempotent, flush/100``: the bursts of the 100/txn path without transactions, each ended by
  flush() (what waiting for 100 records' acknowledgements alone costs; its "commit" column is
  the flush).

Every round runs each path once, rotating which goes first; ratios against ``idempotent`` are
the median of per-round ratios, as the machine is shared. The time of each commit_transaction()
call is recorded too (p50 and p99 over every transaction of every round). Run from the
repository root (about 3 minutes; ``--quick`` about 20 s)::

    .venv/bin/python -m bench.bench_transactions [--quick] [--repeat N] [--json] [--from-json F] [--keep]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tributary.testing.cluster import Cluster, wait_for_leaders
from tributary.testing.zookeeper import new_chroot

from . import common
from .bench_records import make_corpus
from .common import log
from .processes import ZooKeeper

TOPIC, PARTITIONS, VALUE_SIZE = "events", 3, 200
SETTINGS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "transaction.state.log.num.partitions": "5",
}
PRODUCER = {"acks": "all", "linger.ms": 5, "enable.idempotence": True}


@dataclass(frozen=True)
class Path_:
    label: str
    #: Records per transaction (or per flush); 0: one stream.
    per_transaction: int
    transactional: bool = True


PATHS = (
    Path_("idempotent", 0),
    Path_("transactional, 100/txn", 100),
    Path_("transactional, 1000/txn", 1000),
    # The same bursts without transactions: what the synchronous waits alone cost.
    Path_("idempotent, flush/100", 100, transactional=False),
)
BASELINE = PATHS[0].label


@dataclass(frozen=True)
class Sizes:
    rounds: int
    messages: int

    @staticmethod
    def pick(quick: bool, repeat: int | None) -> Sizes:
        rounds = repeat if repeat is not None else 1 if quick else 5
        return Sizes(rounds=rounds, messages=2_000 if quick else 50_000)


@dataclass
class Results:
    #: path -> seconds of each round
    seconds: dict[str, list[float]] = field(default_factory=dict)
    #: path -> seconds of every commit_transaction() call
    commits: dict[str, list[float]] = field(default_factory=dict)
    load: list[float] = field(default_factory=list)


def plain_run(bootstrap: str, values: Sequence[bytes], count: int) -> float:
    return common.confluent_produce(bootstrap, TOPIC, values, count, PRODUCER, label=BASELINE)


def transactional_run(
    bootstrap: str, values: Sequence[bytes], count: int, per_transaction: int, transactional_id: str | None
) -> tuple[float, list[float]]:
    """Seconds to send ``count`` values in transactions of ``per_transaction``, and each commit's
    time; initialising the producer (InitProducerId) is not timed. Without a transactional id:
    the same bursts, each ended by flush() instead of a commit."""
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    config = {"transactional.id": transactional_id} if transactional_id is not None else {}
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "delivery.report.only.error": True,
            "on_delivery": delivered,
            **PRODUCER,
            **config,
        }
    )
    if transactional_id is not None:
        producer.init_transactions(60)
    producer.list_topics(TOPIC, timeout=10)
    commits: list[float] = []
    n = len(values)
    start = time.perf_counter()
    sent = 0
    while sent < count:
        if transactional_id is not None:
            producer.begin_transaction()
        for i in range(min(per_transaction, count - sent)):
            producer.produce(TOPIC, values[(sent + i) % n])
        sent += min(per_transaction, count - sent)
        before = time.perf_counter()
        if transactional_id is not None:
            producer.commit_transaction(60)
        elif producer.flush(60):
            raise RuntimeError("flush left messages undelivered")
        commits.append(time.perf_counter() - before)
    seconds = time.perf_counter() - start
    producer.close()
    if errors:
        raise RuntimeError(f"transactional: errors {errors}")
    return seconds, commits


def create_topic(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=30).values():
        future.result(timeout=60)
    wait_for_leaders(cluster.brokers, TOPIC, PARTITIONS)


def run(cluster: Cluster, values: Sequence[bytes], sizes: Sizes, out: Results) -> None:
    create_topic(cluster)
    bootstrap = cluster.bootstrap
    log(f"{sizes.messages:,} x {VALUE_SIZE} B per path and round, {sizes.rounds} rounds")
    for path in PATHS:  # warm-up, untimed: __transaction_state is created here
        count = max(1_000, sizes.messages // 10)
        if path.per_transaction:
            txn_id = f"warm-{path.per_transaction}" if path.transactional else None
            transactional_run(bootstrap, values, count, path.per_transaction, txn_id)
        else:
            plain_run(bootstrap, values, count)
    for r in range(sizes.rounds):
        order = PATHS[r % len(PATHS) :] + PATHS[: r % len(PATHS)]
        for path in order:
            os.sync()
            if path.per_transaction:
                txn_id = f"bench-{path.per_transaction}-{r}" if path.transactional else None
                seconds, commits = transactional_run(bootstrap, values, sizes.messages, path.per_transaction, txn_id)
                out.commits.setdefault(path.label, []).extend(commits)
            else:
                seconds = plain_run(bootstrap, values, sizes.messages)
            out.seconds.setdefault(path.label, []).append(seconds)
        out.load.append(os.getloadavg()[0])
        note = "; ".join(f"{p.label} {sizes.messages / out.seconds[p.label][-1]:,.0f} msgs/s" for p in PATHS)
        log(f"  round {r + 1}/{sizes.rounds} (load {out.load[-1]:.1f}): {note}")


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(out: Results, sizes: Sizes) -> dict[str, Any]:
    base = out.seconds[BASELINE]
    paths: dict[str, Any] = {}
    for path in PATHS:
        seconds = out.seconds[path.label]
        commits = out.commits.get(path.label, [])
        paths[path.label] = {
            "per_transaction": path.per_transaction,
            "seconds": [round(s, 4) for s in seconds],
            "msgs_per_s": sizes.messages / statistics.median(seconds),
            "ratio": statistics.median(b / s for s, b in zip(seconds, base, strict=True)),
            "transactional": path.transactional,
            "transactions_per_s": len(commits) / sum(seconds) if commits else None,
            "commit_p50_ms": percentile(commits, 0.5) * 1e3 if commits else None,
            "commit_p99_ms": percentile(commits, 0.99) * 1e3 if commits else None,
        }
    return paths


HEADER = """\
Transactions: 100 (and 1000) records per transaction against an idempotent producer, same cluster, same run
{machine}
command: {command}
client: confluent-kafka {client}; acks=all, linger.ms 5
three brokers; a topic of 3 partitions, RF 3, min.insync.replicas 2
{rounds} rounds of {messages:,} x {size} B events per path, the paths alternating (rotating who goes first);
  msgs/s: median over rounds; 'vs idempotent': the median of per-round ratios; commit: the time of each
  commit_transaction() call (flush() for the path without transactions), p50 and p99 over every one;
  load average {load}"""


def render(document: dict[str, Any]) -> str:
    m, s = document["machine"], document["sizes"]
    load = document["load_average"]
    lines = [
        HEADER.format(
            machine=f"{m['date']}; {m['cpus']} CPUs ({m['cpu']}); {m['python']}; {m['os']}",
            command=document["command"],
            client=document["confluent_kafka"],
            rounds=s["rounds"],
            messages=s["messages"],
            size=VALUE_SIZE,
            load=f"{min(load):.1f}-{max(load):.1f}",
        ),
        "",
    ]
    rows = []
    for label, p in document["paths"].items():
        rows.append([
            label, f"{p['msgs_per_s']:,.0f}", f"{p['ratio']:.2f}x",
            "-" if p["transactions_per_s"] is None else f"{p['transactions_per_s']:,.0f}",
            "-" if p["commit_p50_ms"] is None else f"{p['commit_p50_ms']:.1f}",
            "-" if p["commit_p99_ms"] is None else f"{p['commit_p99_ms']:.1f}",
        ])  # fmt: skip
    lines.append(common.table(["path", "msgs/s", "vs idempotent", "txns/s", "commit p50 ms", "commit p99 ms"], rows))
    return "\n".join(lines)


def measure(root: Path, sizes: Sizes) -> Results:
    out = Results()
    values = [value for batch in make_corpus(VALUE_SIZE, 64, 64) for _, value, _ in batch]
    zookeeper = ZooKeeper(root / "zookeeper").start()
    try:
        with Cluster(new_chroot(zookeeper.bootstrap, "txn"), root / "cluster", 3, SETTINGS) as cluster:
            run(cluster, values, sizes, out)
    finally:
        zookeeper.stop()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, 1 round: a smoke run")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 5; 1 with --quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, data)")
    parser.add_argument("--from-json", type=Path, default=None, metavar="F", help="print the tables of a --json file")
    args = parser.parse_args(argv)
    if common.replayed(args, render):
        return 0
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = Sizes.pick(args.quick, args.repeat)
    command = shlex.join([sys.executable, "-m", "bench.bench_transactions", *(sys.argv[1:] if argv is None else argv)])
    machine = common.machine()
    root = Path(tempfile.mkdtemp(prefix="bench-transactions-"))
    started = time.monotonic()
    try:
        out = measure(root, sizes)
    except (KafkaException, RuntimeError, TimeoutError, OSError) as exc:
        log(f"failed: {exc!r}; scratch directory kept: {root}")
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    document = {
        "machine": machine,
        "command": command,
        "confluent_kafka": f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})",
        "sizes": asdict(sizes),
        "broker_settings": SETTINGS,
        "producer": PRODUCER,
        "load_average": out.load,
        "paths": summary(out, sizes),
    }
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
