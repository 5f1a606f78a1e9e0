"""The ACL store against a real ZooKeeper: Kafka's node layout, every store hearing of every change
within a second, Kafka's own tool's writes picked up, concurrent writers, a restart, an expired
session, old change nodes purged, malformed nodes skipped. Each store is what one broker runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from kazoo.client import KazooClient

from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.broker.security.acl_store import ZkAclStore
from tributary.protocol.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
ORD_PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
READ_ALICE = AccessControlEntry("User:alice", "*", AclOperation.READ, ALLOW)
WRITE_BOB = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE, DENY)
#: What "within a second" allows for, measured from the write's acknowledgement.
PROPAGATION = 1.0


@asynccontextmanager
async def running(zookeeper: ZooKeeperHandle, **options: Any) -> AsyncIterator[ZkAclStore]:
    store = ZkAclStore(zookeeper.hosts, session_timeout=4.0, reconnect_max_delay=0.3, **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        yield store
        nursery.cancel_scope.cancel()


async def until(condition: Callable[[], bool], within: float, what: str) -> float:
    """Seconds until ``condition`` holds (polled every 10 ms), failing after ``within``."""
    started = trio.current_time()
    with trio.move_on_after(within):
        while not condition():
            await trio.sleep(0.01)
        return trio.current_time() - started
    raise AssertionError(f"not within {within} s: {what}")


class Zk:
    """A plain kazoo client on the test's chroot, playing Kafka's tools (in a thread)."""

    def __init__(self, hosts: str) -> None:
        self.client = KazooClient(hosts=hosts)

    async def __aenter__(self) -> Zk:
        await trio.to_thread.run_sync(self.client.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await trio.to_thread.run_sync(self.client.stop)
        self.client.close()

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))


def entries_of(store: ZkAclStore, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
    return store.acls.entries(pattern)


async def test_kafkas_layout_and_every_store_hears_within_a_second(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper) as one, running(zookeeper) as other, Zk(zookeeper.hosts) as zk:
        assert await one.create([AclBinding(ORDERS, READ_ALICE), AclBinding(ORD_PREFIX, WRITE_BOB)]) == [None, None]
        # The writer knows at once; the other store within the second.
        assert entries_of(one, ORDERS) == {READ_ALICE}
        took = await until(lambda: entries_of(other, ORD_PREFIX) == {WRITE_BOB}, PROPAGATION, "propagation")
        assert entries_of(other, ORDERS) == {READ_ALICE}
        print(f"propagated in {took * 1000:.0f} ms")

        literal, _ = await zk.run(zk.client.get, "/kafka-acl/Topic/orders")
        assert json.loads(literal) == {
            "version": 1,
            "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
        }
        prefixed, _ = await zk.run(zk.client.get, "/kafka-acl-extended/prefixed/Topic/ord")
        assert json.loads(prefixed)["acls"][0]["operation"] == "Write"
        assert json.loads(prefixed)["acls"][0]["permissionType"] == "Deny"
        (change,) = await zk.run(zk.client.get_children, "/kafka-acl-changes")
        assert change.startswith("acl_changes_")
        assert (await zk.run(zk.client.get, f"/kafka-acl-changes/{change}"))[0] == b"TOPIC:orders"
        (extended,) = await zk.run(zk.client.get_children, "/kafka-acl-extended-changes")
        event = json.loads((await zk.run(zk.client.get, f"/kafka-acl-extended-changes/{extended}"))[0])
        assert event == {"version": 1, "resourceType": "TOPIC", "name": "ord", "patternType": "PREFIXED"}

        # Deleting the last entry deletes the node, and every store hears of it.
        everything_on_orders = AclBindingFilter(
            ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL)
        )
        (deleted,) = await other.delete([everything_on_orders])
        assert deleted.deleted == ((AclBinding(ORDERS, READ_ALICE), None),)
        assert await zk.run(zk.client.exists, "/kafka-acl/Topic/orders") is None
        await until(lambda: not entries_of(one, ORDERS), PROPAGATION, "the deletion propagated")


async def test_acls_written_by_kafkas_tool_reach_the_cache(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper) as store, Zk(zookeeper.hosts) as zk:
        # As kafka-acls --authorizer-properties zookeeper.connect=... writes them (Kafka's spacing).
        node = (
            b'{"version": 1, "acls": [ { "host":"*", "permissionType": "Allow",'
            b'"operation": "Describe","principal": "User:carol"}]}'
        )
        await zk.run(zk.client.create, "/kafka-acl/Group/billing", node, makepath=True)
        await zk.run(zk.client.create, "/kafka-acl-changes/acl_changes_", b"Group:billing", sequence=True)
        group = ResourcePattern(ResourceType.GROUP, "billing")
        describe = AccessControlEntry("User:carol", "*", AclOperation.DESCRIBE, ALLOW)
        await until(lambda: entries_of(store, group) == {describe}, PROPAGATION, "the tool's ACL")
        await zk.run(zk.client.delete, "/kafka-acl/Group/billing")
        await zk.run(zk.client.create, "/kafka-acl-changes/acl_changes_", b"Group:billing", sequence=True)
        await until(lambda: not entries_of(store, group), PROPAGATION, "the tool's deletion")


async def test_concurrent_writers_on_one_resource_keep_every_entry(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper) as one, running(zookeeper) as other:
        users = [AccessControlEntry(f"User:u{i}", "*", AclOperation.READ, ALLOW) for i in range(12)]
        async with trio.open_nursery() as nursery:
            for i, entry in enumerate(users):
                nursery.start_soon((one if i % 2 else other).create, [AclBinding(ORDERS, entry)])
        for store in (one, other):
            await until(lambda store=store: entries_of(store, ORDERS) == set(users), PROPAGATION, "every entry")


async def test_a_restarted_store_loads_every_acl(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper) as store:
        await store.create([AclBinding(ORDERS, READ_ALICE), AclBinding(ORD_PREFIX, WRITE_BOB)])
    async with Zk(zookeeper.hosts) as zk:
        # Even with the change nodes gone, a starting store reads every resource node.
        for path in ("/kafka-acl-changes", "/kafka-acl-extended-changes"):
            for child in await zk.run(zk.client.get_children, path):
                await zk.run(zk.client.delete, f"{path}/{child}")
    async with running(zookeeper) as restarted:
        assert entries_of(restarted, ORDERS) == {READ_ALICE}
        assert entries_of(restarted, ORD_PREFIX) == {WRITE_BOB}
        assert len(restarted.acls) == 2


async def test_an_expired_session_reloads_and_hears_changes_again(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper) as writer, running(zookeeper) as victim:
        await writer.create([AclBinding(ORDERS, READ_ALICE)])
        await until(lambda: entries_of(victim, ORDERS) == {READ_ALICE}, PROPAGATION, "the first ACL")
        loads = victim.loads
        client_id = victim.zk_client_id
        assert client_id is not None
        await trio.to_thread.run_sync(zookeeper.expire_session, client_id)
        await writer.create([AclBinding(ORD_PREFIX, WRITE_BOB)])
        await until(lambda: victim.loads > loads, 15, "a reload in the new session")
        await until(lambda: entries_of(victim, ORD_PREFIX) == {WRITE_BOB}, 15, "the ACL made meanwhile")
        # Watches are set again: a later change arrives as quickly as ever.
        await writer.delete([AclBindingFilter(entry=AccessControlEntryFilter(principal="User:alice"))])
        await until(lambda: not entries_of(victim, ORDERS), PROPAGATION, "a change after the reload")


async def test_change_nodes_older_than_fifteen_minutes_are_purged(zookeeper: ZooKeeperHandle) -> None:
    now_ms = [0]  # the store's clock: at first long before any change node was made
    async with running(zookeeper, clock_ms=lambda: now_ms[0]) as store, Zk(zookeeper.hosts) as zk:
        await store.create([AclBinding(ORDERS, READ_ALICE)])
        await until(lambda: bool(store._seen_changes), PROPAGATION, "the change node seen")
        assert await zk.run(zk.client.get_children, "/kafka-acl-changes")
        # Sixteen minutes later, by the store's clock, the next change purges the old node.
        now_ms[0] = 10**13
        await store.create([AclBinding(ORDERS, WRITE_BOB)])

        async def children() -> list[str]:
            return list(await zk.run(zk.client.get_children, "/kafka-acl-changes"))

        with trio.fail_after(5):
            while await children():
                await trio.sleep(0.05)
        assert entries_of(store, ORDERS) == {READ_ALICE, WRITE_BOB}


async def test_malformed_nodes_are_skipped_and_never_overwritten(zookeeper: ZooKeeperHandle) -> None:
    async with Zk(zookeeper.hosts) as zk:
        await zk.run(zk.client.create, "/kafka-acl/Topic/garbled", b"{not json", makepath=True)
        await zk.run(zk.client.create, "/kafka-acl/Planet/earth", b'{"version":1,"acls":[]}', makepath=True)
    async with running(zookeeper) as store, Zk(zookeeper.hosts) as zk:
        await store.create([AclBinding(ORDERS, READ_ALICE)])
        assert set(store.acls.patterns) == {ORDERS}
        garbled = ResourcePattern(ResourceType.TOPIC, "garbled")
        (error,) = await store.create([AclBinding(garbled, READ_ALICE)])
        assert error is not None and "malformed" in error
        assert (await zk.run(zk.client.get, "/kafka-acl/Topic/garbled"))[0] == b"{not json"


async def test_an_exact_delete_finds_acls_this_store_has_not_heard_of(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper) as store, Zk(zookeeper.hosts) as zk:
        # Written without a change node: no store hears of it...
        await zk.run(
            zk.client.create,
            "/kafka-acl/Topic/unheard",
            b'{"version":1,"acls":[{"principal":"User:x","permissionType":"Allow","operation":"Read","host":"*"}]}',
            makepath=True,
        )
        exact = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "unheard", PatternType.LITERAL))
        assert list(store.describe(exact)) == []
        # ...but a filter naming the pattern exactly looks in ZooKeeper, as Kafka's does.
        (deleted,) = await store.delete([exact])
        assert [binding.entry.principal for binding, _ in deleted.deleted] == ["User:x"]
        assert await zk.run(zk.client.exists, "/kafka-acl/Topic/unheard") is None


async def test_writes_fail_cleanly_while_zookeeper_is_away(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper, write_timeout=2.0) as store:
        await store.create([AclBinding(ORDERS, READ_ALICE)])
        zookeeper.stop()
        try:
            (error,) = await store.create([AclBinding(ORDERS, WRITE_BOB)])
            assert error is not None and "within 2 s" in error
            # The cache keeps serving what it had.
            assert entries_of(store, ORDERS) == {READ_ALICE}
        finally:
            zookeeper.start()
        await until(lambda: store.loads >= 2, 20, "a reload after the outage")
        assert await store.create([AclBinding(ORDERS, WRITE_BOB)]) == [None]
        assert entries_of(store, ORDERS) == {READ_ALICE, WRITE_BOB}


async def test_writing_needs_a_running_store(zookeeper: ZooKeeperHandle) -> None:
    store = ZkAclStore(zookeeper.hosts)
    assert await store.create([AclBinding(ORDERS, READ_ALICE)]) == ["the ACL store is not running"]
    (deleted,) = await store.delete(
        [AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL))]
    )
    assert deleted.deleted == ()


async def test_names_zookeeper_cannot_hold_are_refused_and_named_changes_ignored(zookeeper: ZooKeeperHandle) -> None:
    async with running(zookeeper) as store, Zk(zookeeper.hosts) as zk:
        names = ["..", ".", "a\x00b", "tab\there", "\ufff5"]
        errors = await store.create([AclBinding(ResourcePattern(ResourceType.TOPIC, n), READ_ALICE) for n in names])
        assert all(error is not None and "ZooKeeper" in error for error in errors), errors
        # A change node naming such a resource (a foreign tool's) is skipped; the store keeps following.
        await zk.run(zk.client.create, "/kafka-acl-changes/acl_changes_", b"Topic:..", sequence=True)
        await store.create([AclBinding(ORDERS, READ_ALICE)])
        async with running(zookeeper) as other:
            await zk.run(zk.client.create, "/kafka-acl-changes/acl_changes_", b"Topic:..", sequence=True)
            await store.create([AclBinding(ORD_PREFIX, WRITE_BOB)])
            await until(lambda: entries_of(other, ORD_PREFIX) == {WRITE_BOB}, PROPAGATION, "a later change")
        exact = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "..", PatternType.LITERAL))
        assert await store.delete([exact]) != []
