"""Consumer groups of our Consumers on a real three-broker cluster: every assignor with
members joining and leaving one at a time, partition ownership as the members' own
callbacks report it, commits across rebalances, static membership, fencing, and a
group shared with a librdkafka (confluent-kafka) consumer."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer as CKConsumer

from tests.fixtures.tansu import TansuBroker
from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.client.admin.admin import Admin
from tributary.client.consumer.consumer import Consumer, ConsumerRecord
from tributary.client.consumer.errors import GroupMembershipError
from tributary.client.group.membership import MemberState
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.testing.cluster import Cluster as Brokers
from tributary.testing.cluster import start_cluster

from .conftest import topic_name
from .test_consumer import BROKER_SETTINGS, FAST, poll_until, produce, values

PARTITIONS = 12
TIMEOUT = 20


@pytest.fixture(scope="module")
def brokers(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    root = tmp_path_factory.mktemp("group-brokers")
    yield from start_cluster(server_chroot(zookeeper_server, "client"), root, 3, BROKER_SETTINGS)


class Ownership:
    """Who owns which partition, from the members' own on_assign/on_revoke callbacks."""

    def __init__(self) -> None:
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []
        self.revoked: dict[str, int] = {}

    def callbacks(self, member: str) -> dict[str, Callable[[list[TopicPartition]], None]]:
        def on_assign(partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                holder = self.owner.get(tp)
                if holder is not None and holder != member:
                    self.violations.append(f"{tp} assigned to {member} while {holder} owns it")
                self.owner[tp] = member

        def on_revoke(partitions: list[TopicPartition]) -> None:
            self.revoked[member] = self.revoked.get(member, 0) + len(partitions)
            for tp in partitions:
                if self.owner.get(tp) != member:
                    self.violations.append(f"{member} revoked {tp}, owned by {self.owner.get(tp)}")
                self.owner.pop(tp, None)

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    def of(self, member: str) -> set[TopicPartition]:
        return {tp for tp, m in self.owner.items() if m == member}


@dataclass
class Member:
    name: str
    consumer: Consumer | None = None
    records: list[ConsumerRecord] = field(default_factory=list)
    stop: trio.Event = field(default_factory=trio.Event)
    stopped: trio.Event = field(default_factory=trio.Event)


async def run_member(
    brokers: Brokers | TansuBroker, group: str, topics: list[str], member: Member, ownership: Ownership, **settings: Any
) -> None:
    """A consumer that polls (so its callbacks can run) until told to stop, then closes."""
    try:
        async with Consumer(brokers.bootstrap, group, **{**FAST, **settings}) as consumer:
            member.consumer = consumer
            consumer.subscribe(topics, **ownership.callbacks(member.name))
            while not member.stop.is_set():
                member.records += await consumer.poll(0.05)
    finally:
        member.consumer = None
        member.stopped.set()


def settled(members: list[Member], ownership: Ownership, partitions: set[TopicPartition]) -> bool:
    """Every partition owned by one active member, balanced, in one stable generation."""
    if set(ownership.owner) != partitions or set(ownership.owner.values()) - {m.name for m in members}:
        return False
    generations = set()
    for m in members:
        group = m.consumer.group if m.consumer is not None else None
        if group is None or group.state is not MemberState.STABLE or group.rejoin_wanted:
            return False
        generations.add(group.generation.generation_id)
    sizes = [len(ownership.of(m.name)) for m in members]
    return len(generations) == 1 and max(sizes) - min(sizes) <= 1


async def wait_settled(members: list[Member], ownership: Ownership, partitions: set[TopicPartition]) -> None:
    with trio.fail_after(TIMEOUT):
        while not settled(members, ownership, partitions):
            await trio.sleep(0.02)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
async def test_members_join_and_leave_one_at_a_time(brokers: Brokers, assignor: str) -> None:
    topic, group = topic_name(f"grp-{assignor}"), topic_name("g")
    partitions = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    ownership = Ownership()
    sticky = "sticky" in assignor
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, PARTITIONS)
    active: list[Member] = []

    def moved(before: dict[TopicPartition, str]) -> dict[TopicPartition, tuple[str, str]]:
        return {tp: (m, ownership.owner[tp]) for tp, m in before.items() if ownership.owner[tp] != m}

    async with trio.open_nursery() as nursery:
        for i in range(4):
            before = dict(ownership.owner)
            newcomer = Member(f"m{i}")
            active.append(newcomer)
            nursery.start_soon(
                partial(
                    run_member, brokers, group, [topic], newcomer, ownership, partition_assignment_strategy=(assignor,)
                )
            )
            await wait_settled(active, ownership, partitions)
            if sticky and before:
                # Only what the newcomer needs moves, and only to it.
                changes = moved(before)
                assert {new for _, new in changes.values()} == {newcomer.name}, changes
                assert len(changes) == len(ownership.of(newcomer.name)) == PARTITIONS // len(active)

        for leaving in list(active[:-1]):
            before = dict(ownership.owner)
            revoked_before = dict(ownership.revoked)
            leaving.stop.set()
            with trio.fail_after(TIMEOUT):
                await leaving.stopped.wait()
            active.remove(leaving)
            await wait_settled(active, ownership, partitions)
            if sticky:
                # Only the leaver's partitions move.
                changes = moved({tp: m for tp, m in before.items() if tp in ownership.owner})
                assert {old for old, _ in changes.values()} <= {leaving.name}, changes
                assert {tp for tp, m in before.items() if m == leaving.name} == set(changes)
            if assignor == "cooperative-sticky":
                # Nobody else gave anything up.
                others = {m: n for m, n in ownership.revoked.items() if m != leaving.name}
                assert others == {m: n for m, n in revoked_before.items() if m != leaving.name}

        active[-1].stop.set()
    assert ownership.violations == []
    assert ownership.owner == {}


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
async def test_every_record_once_across_rebalances(brokers: Brokers, assignor: str) -> None:
    """With auto-commit, partitions change hands at exactly the committed positions:
    given up partitions are committed first, so no record is read twice or skipped."""
    topic, group = topic_name(f"once-{assignor}"), topic_name("g")
    per_partition = 30
    ownership = Ownership()
    settings = {"partition_assignment_strategy": (assignor,), "auto_offset_reset": "earliest", "max_poll_records": 7}
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 4)
        for p in range(4):
            await produce(cluster, topic, p, values(f"a{p}", per_partition))
        members = [Member("first"), Member("second"), Member("third")]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(run_member, brokers, group, [topic], members[0], ownership, **settings))
            with trio.fail_after(TIMEOUT):
                while len(members[0].records) < 20:
                    await trio.sleep(0.01)
            nursery.start_soon(partial(run_member, brokers, group, [topic], members[1], ownership, **settings))
            await wait_settled(members[:2], ownership, {TopicPartition(topic, p) for p in range(4)})
            for p in range(4):
                await produce(cluster, topic, p, values(f"b{p}", per_partition))
            nursery.start_soon(partial(run_member, brokers, group, [topic], members[2], ownership, **settings))
            members[0].stop.set()
            with trio.fail_after(TIMEOUT):
                while sum(len(m.records) for m in members) < 8 * per_partition:
                    await trio.sleep(0.02)
            for m in members:
                m.stop.set()
    seen = sorted((r.partition, r.offset) for m in members for r in m.records)
    assert seen == [(p, o) for p in range(4) for o in range(2 * per_partition)]
    assert ownership.violations == []


async def test_static_member_comes_back_without_a_rebalance(brokers: Brokers) -> None:
    topic, group = topic_name("static"), topic_name("g")
    partitions = {TopicPartition(topic, p) for p in range(4)}
    ownership = Ownership()
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 4)
    a, b = Member("a"), Member("b")
    async with trio.open_nursery() as nursery:
        for m in (a, b):
            static = partial(run_member, brokers, group, [topic], m, ownership, group_instance_id=f"instance-{m.name}")
            nursery.start_soon(static)
        await wait_settled([a, b], ownership, partitions)
        assert b.consumer is not None and b.consumer.group is not None
        generation = b.consumer.group.generation.generation_id
        had = ownership.of("a")
        a.stop.set()  # a static member closes without LeaveGroup
        with trio.fail_after(TIMEOUT):
            await a.stopped.wait()
        again = Member("a")
        back = partial(run_member, brokers, group, [topic], again, ownership, group_instance_id="instance-a")
        nursery.start_soon(back)
        await wait_settled([again, b], ownership, partitions)
        assert ownership.of("a") == had
        assert b.consumer.group.generation.generation_id == generation  # b never rebalanced
        for m in (again, b):
            m.stop.set()


async def test_a_fenced_static_member_fails(brokers: Brokers) -> None:
    """Two live consumers with one group instance id: the newer one fences the older,
    whose poll raises FENCED_INSTANCE_ID."""
    topic, group = topic_name("fenced"), topic_name("g")
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 2)
    settings: dict[str, Any] = {"group_instance_id": "twin", **FAST}
    async with Consumer(brokers.bootstrap, group, **settings) as old:
        old.subscribe([topic])
        with trio.fail_after(TIMEOUT):
            while len(old.assignment()) < 2:
                await old.poll(0.05)
        async with Consumer(brokers.bootstrap, group, **settings) as new:
            new.subscribe([topic])
            with trio.fail_after(TIMEOUT), pytest.raises(GroupMembershipError, match="FENCED_INSTANCE_ID"):
                while True:
                    await old.poll(0.05)
                    await new.poll(0.01)


async def test_group_shared_with_librdkafka(brokers: Brokers) -> None:
    """Our consumer and a confluent-kafka consumer in one group, both offering "range".
    Whichever joins first reads partitions that then move to the other, which goes on
    from the committed offsets: every record is read once, by one of them."""
    topic, group = topic_name("mixed"), topic_name("g")
    partitions = {TopicPartition(topic, p) for p in range(6)}
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 6)
        for p in range(6):
            await produce(cluster, topic, p, values(f"m{p}", 10))

    theirs: set[TopicPartition] = set()
    their_records: list[tuple[int, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def librdkafka_member() -> None:
        consumer = CKConsumer({
            "bootstrap.servers": brokers.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range", "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip

        def assigned(_: Any, tps: list[Any]) -> None:
            with lock:
                theirs.update(TopicPartition(tp.topic, tp.partition) for tp in tps)

        def revoked(_: Any, tps: list[Any]) -> None:
            with lock:
                theirs.difference_update(TopicPartition(tp.topic, tp.partition) for tp in tps)

        consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
        try:
            while not stop.is_set():
                message = consumer.poll(0.05)
                if message is not None and message.error() is None:
                    with lock:
                        their_records.append((message.partition() or 0, message.offset() or 0))
        finally:
            consumer.close()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: trio.to_thread.run_sync(librdkafka_member, abandon_on_cancel=False))
        try:
            async with Consumer(brokers.bootstrap, group, auto_offset_reset="earliest", **FAST) as ours:
                ours.subscribe([topic])
                our_records: list[ConsumerRecord] = []
                with trio.fail_after(TIMEOUT):
                    while True:
                        our_records += await ours.poll(0.05)
                        mine = ours.assignment()
                        with lock:
                            split = theirs | mine == partitions and not theirs & mine
                            read = len(our_records) + len(their_records)
                        if split and len(mine) == 3 and read >= 60:
                            break
                assert ours.group is not None and ours.group.protocol == "range"
        finally:
            stop.set()
    ours_seen = {(r.partition, r.offset) for r in our_records}
    assert ours_seen | set(their_records) == {(p, o) for p in range(6) for o in range(10)}
    assert not ours_seen & set(their_records)


async def test_consume_and_a_group_of_two_on_tansu(tansu: TansuBroker) -> None:
    """Our client against a foreign broker: produce, consume by assignment, then a
    group of two of our consumers sharing the topic."""
    topic, group = topic_name("tansu-consume"), topic_name("tansu-group")
    async with Cluster(tansu.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 4)
        for p in range(4):
            await produce(cluster, topic, p, values(f"t{p}", 10))
    async with Consumer(tansu.bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        records = await poll_until(consumer, 40)
    assert sorted((r.partition, r.offset, r.value) for r in records) == [
        (p, o, f"t{p}-{o}".encode()) for p in range(4) for o in range(10)
    ]

    ownership = Ownership()
    partitions = {TopicPartition(topic, p) for p in range(4)}
    members = [Member("a"), Member("b")]
    settings: dict[str, Any] = {"auto_offset_reset": "earliest", "session_timeout_ms": 10_000}
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(partial(run_member, tansu, group, [topic], m, ownership, **settings))
        await wait_settled(members, ownership, partitions)
        with trio.fail_after(TIMEOUT):
            while sum(len(m.records) for m in members) < 40:
                await trio.sleep(0.02)
        for m in members:
            m.stop.set()
    assert ownership.violations == []
    assert sorted((r.partition, r.offset) for m in members for r in m.records) == [
        (p, o) for p in range(4) for o in range(10)
    ]


async def test_changing_the_subscription_moves_the_assignment(brokers: Brokers) -> None:
    first, second, group = topic_name("first"), topic_name("second"), topic_name("g")
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(first, 2)
        await Admin(cluster).create_topic(second, 3)
    revoked: list[TopicPartition] = []
    for strategy in ("range", "cooperative-sticky"):
        async with Consumer(brokers.bootstrap, f"{group}-{strategy}", partition_assignment_strategy=(strategy,),
                            **FAST) as consumer:  # fmt: skip
            consumer.subscribe([first], on_revoke=revoked.extend)
            with trio.fail_after(TIMEOUT):
                while consumer.assignment() != {TopicPartition(first, p) for p in range(2)}:
                    await consumer.poll(0.05)
            consumer.subscribe([second], on_revoke=revoked.extend)
            with trio.fail_after(TIMEOUT):
                while consumer.assignment() != {TopicPartition(second, p) for p in range(3)}:
                    await consumer.poll(0.05)
            assert sorted(revoked) == [TopicPartition(first, 0), TopicPartition(first, 1)]
            assert consumer.subscription() == {second}
            await consumer.unsubscribe()
            assert consumer.assignment() == set() and consumer.group is None
            assert len(revoked) == 5
            revoked.clear()


async def test_a_callback_error_is_raised_by_poll(brokers: Brokers) -> None:
    topic, group = topic_name("cb"), topic_name("g")
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 1)

    def broken(partitions: list[TopicPartition]) -> None:
        raise ValueError(f"cannot handle {partitions}")

    async with Consumer(brokers.bootstrap, group, **FAST) as consumer:
        consumer.subscribe([topic], on_assign=broken)
        with trio.fail_after(TIMEOUT), pytest.raises(ValueError, match="cannot handle"):
            while True:
                await consumer.poll(0.05)
        # The rebalance completed all the same; the error is raised once.
        assert consumer.assignment() == {TopicPartition(topic, 0)}
        assert await consumer.poll(0.05) == []
