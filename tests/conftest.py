"""Suite-wide fixtures: the ZooKeeper server (tests/fixtures/zookeeper.py) and its report header."""

pytest_plugins = ["tests.fixtures.zookeeper", "tests.fixtures.brokers"]
