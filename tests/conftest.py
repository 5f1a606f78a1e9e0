"""Suite-wide fixtures: containers where Docker answers (tests/fixtures/containers.py), the ZooKeeper
server (tests/fixtures/zookeeper.py) and its report header, the brokers, ``--long``
(tests/fixtures/schedules.py), the suite spread over pytest-xdist's workers
(tests/fixtures/xdist.py), Spark's JVMs tuned for short runs (tests/fixtures/spark.py) and
Hypothesis without deadlines (tests/fixtures/hypothesis_profile.py), and a crashed worker's
fatal signal printed under the summary (tests/fixtures/crashes.py)."""

pytest_plugins = [
    "tests.fixtures.containers",
    "tests.fixtures.zookeeper",
    "tests.fixtures.brokers",
    "tests.fixtures.schedules",
    "tests.fixtures.xdist",
    "tests.fixtures.spark",
    "tests.fixtures.hypothesis_profile",
    "tests.fixtures.crashes",
]
