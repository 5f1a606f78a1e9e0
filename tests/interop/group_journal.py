"""Consumer group members in processes of their own (``group_member.py``), and what their
journals show: who owned which partition when, what was consumed, and how long a member
that kept a partition through a change went without consuming it.

Shared by tests/interop/test_consumer_groups_kip848.py and bench/bench_groups.py.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from tributary.testing.processes import ChildProcess

ROOT = Path(__file__).resolve().parents[2]


#: The member programs: librdkafka's consumer (confluent-kafka), or Tributary's.
MEMBER_PROGRAMS = {"confluent": "tests.interop.group_member", "tributary": "tests.interop.group_member_tributary"}


class MemberProcess(ChildProcess):
    """A member program (``MEMBER_PROGRAMS``) in a process of its own, with its journal and log."""

    STOP_TIMEOUT = 30.0

    def __init__(  # noqa: PLR0917 (what the member program takes, in its order)
        self,
        name: str,
        bootstrap: str,
        group: str,
        topic: str,
        protocol: str,
        directory: Path,
        work_ms: int = 0,
        client: str = "confluent",
    ) -> None:
        self.name = name
        self.journal_path = directory / f"{name}.journal"
        self.log_path = directory / f"{name}.log"
        self.command = [
            sys.executable, "-m", MEMBER_PROGRAMS[client], "--bootstrap", bootstrap, "--group", group,
            "--topic", topic, "--protocol", protocol, "--journal", str(self.journal_path), "--work-ms", str(work_ms),
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None
        #: When it was killed (kill -9) or stopped: its ownership ends there at the latest.
        self.ended_at: float | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)

    def kill(self) -> None:
        super().kill()
        self.ended_at = time.time()

    def close(self) -> int:
        code = self.stop()
        self.ended_at = time.time()
        return code

    def events(self) -> list[dict[str, Any]]:
        return read_journal(self.journal_path)


class SteadyProducer:
    """Writes to every partition in turn, about ``rate`` records a second, until stopped;
    remembers each acknowledged (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.acked: dict[int, list[int]] = defaultdict(list)
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            self.acked[message.partition()].append(message.offset())

    def _run(self) -> None:
        sent = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            self.producer.produce(
                self.topic, value=b"%d" % sent, partition=sent % self.partitions, on_delivery=self._delivered
            )
            sent += 1
            self.producer.poll(0)
            ahead = sent / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        self.producer.flush(30)

    def __enter__(self) -> SteadyProducer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join(60)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The journal's events; a line cut short by kill -9 is dropped."""
    events = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


@dataclass
class Ownership:
    """Each member's ownership of each partition as intervals [start, end)."""

    intervals: dict[int, list[tuple[float, float, str]]] = field(default_factory=lambda: defaultdict(list))
    #: (member, partition, time): a member revoked a partition and was its next owner again,
    #: nobody having owned it in between: it gave up a partition it kept.
    kept_but_revoked: list[tuple[str, int, float]] = field(default_factory=list)


def ownership(members: Iterable[MemberProcess], now: float | None = None) -> Ownership:
    """Intervals from the journals: ``assign`` opens one, ``revoke``/``lost`` closes it, a
    kill closes all of the member's (a kill -9 ends ownership at once)."""
    result = Ownership()
    end_of_time = now if now is not None else time.time()
    revoked: set[tuple[str, int, float]] = set()
    for member in members:
        opened: dict[int, float] = {}
        for event in member.events():
            t, kind = event["t"], event["ev"]
            if kind == "assign":
                for p in event["parts"]:
                    opened.setdefault(p, t)
            elif kind in ("revoke", "lost"):
                for p in event["parts"]:
                    if p in opened:
                        result.intervals[p].append((opened.pop(p), t, member.name))
                        revoked.add((member.name, p, t))
        end = member.ended_at if member.ended_at is not None else end_of_time
        for p, start in opened.items():
            result.intervals[p].append((start, end, member.name))
    for p, spans in result.intervals.items():
        for (_, e1, m1), (s2, _, m2) in itertools.pairwise(sorted(spans)):
            if m1 == m2 and (m1, p, e1) in revoked:
                result.kept_but_revoked.append((m1, p, s2))
    return result


def two_owners(owned: Ownership) -> list[str]:
    """Times at which a partition had two owners."""
    problems = []
    for p, unsorted in owned.intervals.items():
        for (_, e1, m1), (s2, _, m2) in itertools.pairwise(sorted(unsorted)):
            if m1 != m2 and s2 < e1:
                problems.append(f"partition {p}: {m1} owned it until {e1:.3f}, {m2} from {s2:.3f}")
    return problems


def current(member: MemberProcess) -> set[int]:
    """What the member owns now, by its journal."""
    return _owned_at(member.events(), float("inf"))


def settled(members: Iterable[MemberProcess], partitions: int) -> bool:
    """Every partition owned by exactly one live member, and every live member owning its
    share (the partitions split as evenly as they can be)."""
    live = [m for m in members if m.running()]
    if not live:
        return False
    owned: dict[int, list[str]] = defaultdict(list)
    shares = []
    for member in live:
        now = current(member)
        shares.append(len(now))
        for p in now:
            owned[p].append(member.name)
    complete = sorted(owned) == list(range(partitions)) and all(len(names) == 1 for names in owned.values())
    return complete and min(shares) >= partitions // len(live) and max(shares) <= -(-partitions // len(live))


def consumed(members: Iterable[MemberProcess]) -> dict[int, set[int]]:
    result: dict[int, set[int]] = defaultdict(set)
    for member in members:
        for event in member.events():
            if event["ev"] == "msg":
                result[event["p"]].add(event["o"])
    return result


def missing(members: Iterable[MemberProcess], produced: Mapping[int, Iterable[int]]) -> dict[int, list[int]]:
    """Acknowledged offsets no member consumed, per partition."""
    seen = consumed(members)
    gaps = {p: sorted(set(offsets) - seen.get(p, set())) for p, offsets in produced.items()}
    return {p: offsets for p, offsets in gaps.items() if offsets}


def pauses(members: Iterable[MemberProcess], start: float, end: float) -> dict[tuple[str, int], float]:
    """For each partition a member owned both before ``start`` and after ``end`` (kept
    through the change), the longest time within [start, end] it went without a record of it.
    A member that ended (left, was killed) before ``end`` kept nothing."""
    result = {}
    for member in members:
        if member.ended_at is not None and member.ended_at < end:
            continue
        events = member.events()
        for p in _owned_at(events, start) & _owned_at(events, end):
            times = [e["t"] for e in events if e["ev"] == "msg" and e["p"] == p and start <= e["t"] <= end]
            result[member.name, p] = max(b - a for a, b in itertools.pairwise([start, *times, end]))
    return result


def longest_pause(members: Iterable[MemberProcess], start: float, end: float) -> tuple[float, str]:
    """The longest of :func:`pauses`, and which member and partition it was."""
    found = pauses(members, start, end)
    if not found:
        return 0.0, "none"
    (name, p), gap = max(found.items(), key=lambda item: item[1])
    return gap, f"{name} partition {p}"


def _owned_at(events: list[dict[str, Any]], at: float) -> set[int]:
    owned: set[int] = set()
    for event in events:
        if event["t"] > at:
            break
        if event["ev"] == "assign":
            owned |= set(event["parts"])
        elif event["ev"] in ("revoke", "lost"):
            owned -= set(event["parts"])
    return owned
