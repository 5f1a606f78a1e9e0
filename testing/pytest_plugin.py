"""pytest fixtures for testing against real Tributary brokers.

Load it from a ``conftest.py`` or a test module: ``pytest_plugins = ["tributary.testing.pytest_plugin"]``.

- ``tributary_zookeeper`` (session): a :class:`~tributary.testing.zookeeper.LocalZooKeeper`,
  started once, killed at the end (needs Debian's ``zookeeper`` package and a Java runtime).
- ``tributary_cluster``: a running :class:`~tributary.testing.cluster.Cluster` for one test, in a
  ZooKeeper chroot of its own; three brokers unless the test says otherwise with
  ``@pytest.mark.tributary_cluster(brokers=1, config={"num.partitions": "3"})``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tributary.testing.cluster import Cluster
from tributary.testing.zookeeper import LocalZooKeeper, new_chroot

DEFAULT_BROKERS = 3


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tributary_cluster(brokers=3, config=None): the size and broker settings of tributary_cluster"
    )


@pytest.fixture(scope="session")
def tributary_zookeeper() -> Iterator[LocalZooKeeper]:
    workdir = Path(tempfile.mkdtemp(prefix="tributary-zk-"))
    try:
        with LocalZooKeeper(workdir) as server:
            yield server
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def tributary_cluster(
    request: pytest.FixtureRequest, tributary_zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    marker = request.node.get_closest_marker("tributary_cluster")
    options = dict(marker.kwargs) if marker is not None else {}
    brokers = int(options.pop("brokers", DEFAULT_BROKERS))
    config = options.pop("config", None)
    if options:
        raise pytest.UsageError(f"tributary_cluster marker: unknown options {sorted(options)}")
    tributary_zookeeper.start()  # a test may have stopped it
    zookeeper = new_chroot(tributary_zookeeper.hosts, "cluster")
    with Cluster(zookeeper, tmp_path_factory.mktemp("tributary"), brokers, config) as cluster:
        yield cluster
