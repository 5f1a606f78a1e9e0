"""Tributary: a multi-datacenter mirroring appliance speaking the Kafka protocol.

One import namespace for every part, so that nothing collides in a shared environment (a Spark
executor above all). The packages, bottom up (docs/architecture.md; import-linter enforces it):

- ``tributary.protocol``: the sans-IO Kafka wire protocol
- ``tributary.client``: the Trio client, and the blocking fetcher for Spark executors
- ``tributary.broker``: the Trio broker
- ``tributary.mirror``: the mirror daemon
- ``tributary.loader``: the PySpark loader
- ``tributary.deploy``: the topology, the local launcher and the ``tributary`` command
- ``tributary.testing``: ZooKeeper, broker clusters, a fault proxy and a history checker for tests
  (the project's own and its users'); nothing in the product imports it

The folders live at the repository root (``protocol/``, ``client/``, ...). In a checkout this
folder holds links to them, so tools and tests see the same namespace the wheel installs;
pyproject.toml maps the folders into the wheel with setuptools' ``package-dir``.
"""
