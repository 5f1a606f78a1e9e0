"""Real Tributary brokers, ZooKeeper and faulty links for tests: the project's own and its users'.

As ``trio.testing`` is to trio: what a test of code that talks to Tributary (or any Kafka client
talking to it) needs, nothing mocked.

- :mod:`~tributary.testing.zookeeper`: a local ZooKeeper server, chroots, session expiry.
- :mod:`~tributary.testing.cluster`: brokers as child processes, one or a cluster, on free ports.
- :mod:`~tributary.testing.fault_proxy`: a trio TCP proxy that cuts, stalls, rate-caps and delays
  the link between clients and brokers.
- :mod:`~tributary.testing.history`: numbered records, and a checker that says which acknowledged
  records are missing, duplicated or out of order.
- :mod:`~tributary.testing.pytest_plugin`: the ``tributary_zookeeper`` and ``tributary_cluster``
  fixtures.
- :mod:`~tributary.testing.wire`: one Kafka request, one response, on a blocking socket.
- :mod:`~tributary.testing.polling`: ``eventually``, for state a test cannot be told about.

docs/testing.md shows a user's test file. Nothing in the product imports this package.
"""

from tributary.testing.cluster import BrokerProcess, Cluster, start_cluster, wait_for_leaders
from tributary.testing.fault_proxy import FaultyProxy, LinkMode, ProxyThread
from tributary.testing.history import (
    History,
    Verdict,
    produce_sequence,
    read_partitions,
    sequence_value,
    wait_until_served,
)
from tributary.testing.polling import eventually
from tributary.testing.zookeeper import LocalZooKeeper, new_chroot

__all__ = [
    "BrokerProcess",
    "Cluster",
    "FaultyProxy",
    "History",
    "LinkMode",
    "LocalZooKeeper",
    "ProxyThread",
    "Verdict",
    "eventually",
    "new_chroot",
    "produce_sequence",
    "read_partitions",
    "wait_until_served",
    "sequence_value",
    "start_cluster",
    "wait_for_leaders",
]
