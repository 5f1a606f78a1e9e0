"""Fixtures of the client tests: brokers shared by a module, Tansu, unique topic names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fixtures.tansu import TansuBroker, tansu
from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.testing.cluster import Cluster, start_cluster

__all__ = ["TansuBroker", "tansu"]


@pytest.fixture(scope="module")
def shared_cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers for a module's tests that leave them running; each test makes topics of its own."""
    yield from start_cluster(server_chroot(zookeeper_server, "client"), tmp_path_factory.mktemp("brokers"), 3)


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
