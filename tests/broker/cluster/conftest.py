"""Runs several ClusterRegistry instances (brokers 1, 2, 3, ...) in one process for a test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import trio

from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.broker.cluster import BrokerInfo, ClusterRegistry

# Short enough that lost sessions and reconnections resolve well within a test's time budget.
SESSION_TIMEOUT = 4.0
RECONNECT_MAX_DELAY = 0.3


@dataclass
class _Running:
    registry: ClusterRegistry
    scope: trio.CancelScope
    done: trio.Event


class Brokers:
    """Starts registries inside the test's nursery, and stops any one of them on demand."""

    def __init__(self, nursery: trio.Nursery, zookeeper: ZooKeeperHandle) -> None:
        self._nursery = nursery
        self.zookeeper = zookeeper
        self._running: dict[int, _Running] = {}

    async def start(self, broker_id: int) -> ClusterRegistry:
        registry = ClusterRegistry(
            self.zookeeper.hosts,
            BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id, f"dc-{broker_id}"),
            session_timeout=SESSION_TIMEOUT,
            reconnect_max_delay=RECONNECT_MAX_DELAY,
        )
        scope = trio.CancelScope()
        done = trio.Event()

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await registry.run(task_status=task_status)
            finally:
                done.set()

        await self._nursery.start(run)
        self._running[broker_id] = _Running(registry, scope, done)
        return registry

    async def start_all(self, *broker_ids: int) -> list[ClusterRegistry]:
        registries = [await self.start(broker_id) for broker_id in broker_ids]
        expected = set(broker_ids)
        for registry in registries:
            await registry.wait_for(lambda s: expected <= set(s.brokers) and s.controller_id is not None)
        return registries

    async def stop(self, broker_id: int) -> None:
        """Cancel one registry (a clean broker shutdown) and wait until it has left."""
        running = self._running.pop(broker_id)
        running.scope.cancel()
        await running.done.wait()

    def __getitem__(self, broker_id: int) -> ClusterRegistry:
        return self._running[broker_id].registry


@pytest.fixture
async def brokers(zookeeper: ZooKeeperHandle) -> AsyncIterator[Brokers]:
    async with trio.open_nursery() as nursery:
        yield Brokers(nursery, zookeeper)
        nursery.cancel_scope.cancel()
