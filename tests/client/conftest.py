"""Fixtures of the client tests: brokers shared by a module, Tansu, unique topic names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from tests.fixtures.brokers import Cluster, start_cluster
from tests.fixtures.tansu import TansuBroker, tansu
from tests.fixtures.zookeeper import ZooKeeperServer

__all__ = ["TansuBroker", "tansu"]


def zookeeper_chroot(server: ZooKeeperServer) -> str:
    """A fresh chroot on the session's ZooKeeper, for brokers shared by several tests."""
    server.start()
    chroot = f"/client-{uuid.uuid4().hex}"
    client = KazooClient(hosts=server.hosts, timeout=5.0)
    try:
        client.start(timeout=10)
        client.ensure_path(chroot)
        client.stop()
    finally:
        client.close()
    return f"{server.hosts}{chroot}"


@pytest.fixture(scope="module")
def shared_cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers for a module's tests that leave them running; each test makes topics of its own."""
    yield from start_cluster(zookeeper_chroot(zookeeper_server), tmp_path_factory.mktemp("brokers"), 3)


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
