"""How long a consumer that keeps its partitions stops consuming them while its group changes:
the classic protocol with librdkafka's default eager assignors against KIP-848, in one run.

One ZooKeeper and three Tributary brokers on loopback; a topic of 16 partitions that a
producer writes steadily (``RATE`` records a second, spread evenly); consumers in processes of
their own, each journalling every rebalance callback and every record consumed with the time
(tests/interop/group_member.py for confluent-kafka, group_member_tributary.py for Tributary's
own Consumer). Three contenders: librdkafka with the classic protocol and its default eager
assignors ("range,roundrobin"), librdkafka with ``group.protocol=consumer``, and Tributary's
Consumer with ``group_protocol="consumer"``. For each, every round: three members share the
topic, one of them slow (it works ``SLOW_MS`` on every batch it polls, the others ``WORK_MS``:
an application that polls seldom), then the group changes:

* ``join``: a fourth member starts;
* ``leave``: a member closes (it revokes, commits and leaves the group);
* ``kill -9``: a member dies; the coordinator notices when its session expires.

For each change, every partition a member owned both before and after it (kept) gets its
pause: the longest time, from the change until the group settled again (every partition
owned, evenly) plus half a second, that the member went without a record of it. The table
shows the longest pause and the median over the kept partitions of the other members (the
slow one's gaps are its own work); a steady stretch without any change gives the noise floor.
With the classic eager protocol every member gives everything up and waits for the whole group
to rejoin, the slow member included, which rejoins only at its next poll. With KIP-848 the
broker revokes only partitions that move, so a member untouched by a change never stops; a
member whose assignment changes pauses its kept partitions only as long as its client makes it
(librdkafka pauses all of the member's partitions during an incremental rebalance and resumes
fetching them some hundreds of milliseconds later; Tributary's Consumer holds back records only
while the callbacks and the commit of what is revoked run). Classic members use
``session.timeout.ms`` 6000 and ``heartbeat.interval.ms`` 500; the brokers
``group.consumer.session.timeout.ms`` 6000 and ``group.consumer.heartbeat.interval.ms`` 500.
Rounds rotate which contender goes first; each figure is the median over the rounds. Run from
the repository root (about 5 minutes; ``--quick``: one round of a join after a second of the
steady stretch, about 40 s)::

    .venv/bin/python -m bench.bench_groups [--quick] [--repeat N] [--work-ms N] [--slow-ms N] [--json] [--keep]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.group_journal import MemberProcess, SteadyProducer, ownership, pauses, settled
from tributary.testing.cluster import Cluster, start_cluster
from tributary.testing.zookeeper import LocalZooKeeper

from .common import log, machine_line, table

PARTITIONS = 16
RATE = 1600
SETTLE_TIMEOUT = 60.0
#: Time past the settling that the pause window still covers (the consumer's fetch restart).
MARGIN = 0.5
CHANGES = ("join", "leave", "kill -9")
#: name -> (group protocol, member program): librdkafka's eager classic consumer against the two
#: KIP-848 consumers, librdkafka's and Tributary's.
CONTENDERS = {
    "classic eager (librdkafka)": ("classic", "confluent"),
    "KIP-848 (librdkafka)": ("consumer", "confluent"),
    "KIP-848 (Tributary)": ("consumer", "tributary"),
}
BASELINE = "classic eager (librdkafka)"
#: How long the steady stretch (no change) lasts whose longest pause is the noise floor.
STEADY_SECONDS = 3.0
#: The same in a smoke run (``--quick``), which has only a join to measure.
QUICK_STEADY_SECONDS = 1.0
#: Time each member spends on every batch it polls (processing), by default.
WORK_MS = 100
#: One member (SLOW) spends this long on each batch instead: an application that polls seldom.
SLOW_MS = 1500
SLOW = "m0"
BROKER_SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


def wait_settled(members: list[MemberProcess]) -> float:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while not settled(members, PARTITIONS):
        if time.monotonic() > deadline:
            tails = "\n".join(m.log_path.read_text()[-1500:] for m in members if m.running())
            raise TimeoutError(f"the group did not settle within {SETTLE_TIMEOUT:g} s\n{tails}")
        time.sleep(0.05)
    return time.time()


def one_round(  # noqa: PLR0917 (one round's parameters)
    cluster: Cluster, contender: str, changes: Sequence[str], directory: Path, tag: str, work_ms: int, slow_ms: int,
    steady_seconds: float = STEADY_SECONDS,
) -> dict[str, Any]:  # fmt: skip
    """One contender through the changes: the pauses of each, and how many partitions a
    member gave up only to get them back."""
    protocol, client = CONTENDERS[contender]
    topic, group = f"bench-{tag}", f"bench-{tag}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept alive until the answer
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    directory.mkdir(parents=True)
    members: list[MemberProcess] = []
    longest: dict[str, float] = {}
    median: dict[str, float] = {}
    where: dict[str, str] = {}

    def measure(change: str, began: float, ended: float) -> None:
        # The slow member's own gaps are its work, not the group's doing.
        found = pauses([m for m in members if m.name != SLOW or not slow_ms], began, ended)
        (name, p), longest[change] = max(found.items(), key=lambda item: item[1])
        median[change] = statistics.median(found.values())
        where[change] = f"{name} partition {p}"
        log(f"{contender:27} {change:8} longest pause {longest[change]:.3f} s ({where[change]}), "
            f"median {median[change]:.3f} s over {len(found)} kept partitions")  # fmt: skip

    def start(name: str) -> MemberProcess:
        work = slow_ms if name == SLOW and slow_ms else work_ms
        member = MemberProcess(name, cluster.bootstrap, group, topic, protocol, directory, work, client)
        member.start()
        members.append(member)
        return member

    actions: dict[str, Callable[[], object]] = {
        "join": lambda: start(f"m{len(members)}"),
        "leave": lambda: next(m for m in members if m.running() and m.name != SLOW).close(),
        "kill -9": lambda: next(m for m in members if m.running() and m.name != SLOW).kill(),
    }
    with SteadyProducer(cluster.bootstrap, topic, PARTITIONS, RATE):
        try:
            for i in range(3):
                start(f"m{i}")
            wait_settled(members)
            # The noise floor: the longest pause over a stretch in which nothing changes.
            began = time.time()
            time.sleep(steady_seconds)
            measure("steady", began, time.time())
            for change in changes:
                began = time.time()
                actions[change]()
                ended = wait_settled(members) + MARGIN
                time.sleep(MARGIN)
                measure(change, began, ended)
                time.sleep(1.0)
        finally:
            for member in members:
                if member.running():
                    member.close()
    revoked_kept = len(ownership(members).kept_but_revoked)
    return {"longest": longest, "median": median, "where": where, "kept_but_revoked": revoked_kept}


def run(  # noqa: PLR0917
    rounds: int, changes: Sequence[str], keep: bool, work_ms: int, slow_ms: int, steady_seconds: float = STEADY_SECONDS
) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
    try:
        with ExitStack() as stack:
            zookeeper = stack.enter_context(LocalZooKeeper(scratch / "zookeeper"))
            clusters: Iterator[Cluster] = start_cluster(zookeeper.hosts, scratch, 3, BROKER_SETTINGS)
            cluster = next(clusters)
            stack.callback(lambda: next(clusters, None))
            log(f"cluster up at {cluster.bootstrap}")
            names = list(CONTENDERS)
            for r in range(rounds):
                for contender in names[r % len(names) :] + names[: r % len(names)]:  # rotate who goes first
                    tag = f"{CONTENDERS[contender][0]}-{CONTENDERS[contender][1]}-{r}"
                    directory = scratch / "members" / tag
                    result = one_round(cluster, contender, changes, directory, tag, work_ms, slow_ms, steady_seconds)
                    results[contender].append(result)
    finally:
        if keep:
            log(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return {
        "rounds": rounds,
        "changes": ["steady", *changes],
        "work_ms": work_ms,
        "slow_ms": slow_ms,
        "results": results,
        "machine": machine_line(),
    }


def summary(report: dict[str, Any]) -> str:
    results = report["results"]
    names = list(results)
    others = [n for n in names if n != BASELINE]

    def cell(name: str, change: str) -> str:
        longest = statistics.median(r["longest"][change] for r in results[name])
        median = statistics.median(r["median"][change] for r in results[name])
        return f"{longest:.2f} / {median:.2f}"

    def ratio(name: str, change: str) -> str:
        ratios = [
            a["median"][change] / max(b["median"][change], 1e-3)
            for a, b in zip(results[BASELINE], results[name], strict=True)
        ]
        return f"{statistics.median(ratios):.1f}x"

    header = ["change", *names, *(f"classic / {n}" for n in others)]
    rows = [[change, *(cell(n, change) for n in names), *(ratio(n, change) for n in others)]
            for change in report["changes"]]  # fmt: skip
    revoked = ", ".join(f"{n} {sum(r['kept_but_revoked'] for r in results[n])}" for n in names)
    return "\n".join([
        "Pause of a kept partition, in seconds (the longest time a member went without a record of a partition "
        "it owned both before and after the change): longest / median over the kept partitions, each the median "
        f"of {report['rounds']} round(s); ratios of the medians. {PARTITIONS} partitions, {RATE} records/s, "
        f"{report['work_ms']} ms of work per polled batch ({report['slow_ms']} ms for one slow member, whose own "
        f"pauses are left out), librdkafka {confluent_kafka.libversion()[0]}.",
        table(header, rows),
        f"partitions a member gave up and got back (all rounds): {revoked}",
        report["machine"],
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round of a join (about 40 s)")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per protocol (default 3, 1 with --quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (journals, logs)")
    parser.add_argument("--work-ms", type=int, default=WORK_MS, help=f"work per polled batch (default {WORK_MS})")
    parser.add_argument(
        "--slow-ms", type=int, default=SLOW_MS, help=f"work per batch of one slow member (default {SLOW_MS}; 0: none)"
    )
    args = parser.parse_args(argv)
    rounds = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    changes = ("join",) if args.quick else CHANGES
    steady = QUICK_STEADY_SECONDS if args.quick else STEADY_SECONDS
    report = run(rounds, changes, args.keep, args.work_ms, args.slow_ms, steady)
    print(json.dumps(report, indent=2) if args.json else summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
