"""The topology file: both examples load, and every mistake is named with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tributary.deploy.appliance.toml_lines import find_line
from tributary.deploy.appliance.topology import TopologyError, load_topology, parse_topology

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def test_local_example_loads() -> None:
    topology = load_topology(EXAMPLES / "local.toml")
    assert list(topology.datacenters) == ["east", "west", "aggregate"]
    assert topology.hadoop_datacenter == "aggregate"
    east = topology.clusters["east"]
    assert east.bootstrap == "127.0.1.1:9092,127.0.1.2:9093,127.0.1.3:9094"
    assert east.zookeeper_connect == "127.0.1.1:2181/tributary/east"
    assert [b.id for b in east.brokers] == [1, 2, 3]
    assert dict(east.topic_defaults) == {
        "num.partitions": 3,
        "default.replication.factor": 3,
        "min.insync.replicas": 2,
        "log.retention.ms": 604800000,
    }
    # Every datacenter has its own loopback network.
    for name, prefix in (("east", "127.0.1."), ("west", "127.0.2."), ("aggregate", "127.0.3.")):
        cluster = topology.clusters[name]
        assert all(b.host.startswith(prefix) for b in cluster.brokers)
        assert all(s.startswith(prefix) for s in cluster.zookeeper.servers)
    # Data directories left out go under the run directory, which is relative to the file.
    repo = EXAMPLES.parents[1]
    assert topology.run_dir == repo / "run" / "local"
    assert east.brokers[1].data_dir == repo / "run" / "local" / "east" / "broker-2"
    assert {(m.alias, m.source, m.target) for m in topology.mirrors.values()} == {
        ("east", "east", "aggregate"),
        ("west", "west", "aggregate"),
    }
    assert topology.mirrors["east"].group == "tributary-mirror-east"
    load = topology.loads["nightly"]
    assert load.cluster == "aggregate"
    assert load.output == (repo / "warehouse").as_uri()
    assert load.metrics_file == repo / "run" / "local" / "loads" / "nightly.prom"
    # East and west serve their datacenter in plain text and the others over SASL_SSL.
    assert [(listener.name, listener.protocol) for listener in east.listeners] == [
        ("INTERNAL", "PLAINTEXT"),
        ("EXTERNAL", "SASL_SSL"),
    ]
    assert east.remote_listener == "EXTERNAL"
    assert east.bootstrap_on("EXTERNAL") == "127.0.1.1:9192,127.0.1.2:9193,127.0.1.3:9194"
    aggregate = topology.clusters["aggregate"]
    assert [(listener.name, listener.protocol) for listener in aggregate.listeners] == [("PLAINTEXT", "PLAINTEXT")]
    assert (topology.security.sasl_mechanism, topology.security.authorizer) == ("SCRAM-SHA-512", True)


def test_production_example_loads() -> None:
    topology = load_topology(EXAMPLES / "production.toml")
    assert set(topology.datacenters) == {"us-east", "eu-west", "agg"}
    for cluster in topology.clusters.values():
        assert len(cluster.zookeeper.servers) == 3
        assert len(cluster.brokers) == 3
        assert all(b.data_dir == Path("/srv/tributary/data") for b in cluster.brokers)
    assert topology.clusters["aggregate"].zookeeper_connect == (
        "zk1.agg.example.net:2181,zk2.agg.example.net:2181,zk3.agg.example.net:2181/tributary/aggregate"
    )
    assert topology.loads["nightly"].output.startswith("hdfs://")
    assert topology.mirrors["use1"].metrics_ports() == (9400, 9401)


def test_run_dir_override(tmp_path: Path) -> None:
    topology = load_topology(EXAMPLES / "local.toml", run_dir=tmp_path)
    assert topology.run_dir == tmp_path
    assert topology.clusters["west"].brokers[0].data_dir == tmp_path / "west" / "broker-1"
    assert topology.clusters["west"].zookeeper.data_dir == tmp_path / "zookeeper" / "west"


GOOD = """\
[datacenters.east]
[datacenters.agg]
hadoop = true

[clusters.east]
datacenter = "east"
zookeeper = { servers = ["127.0.1.1:2181"], chroot = "/t/east" }
topic_defaults = { "num.partitions" = 3 }
brokers = [
    { id = 1, host = "127.0.1.1", port = 9092 },
    { id = 2, host = "127.0.1.2", port = 9093, metrics_port = 9308 },
]

[clusters.agg]
datacenter = "agg"
zookeeper = { servers = ["127.0.3.1:2181"] }
brokers = [{ id = 1, host = "127.0.3.1", port = 9092 }]

[mirrors.west]
source = "east"
target = "agg"
metrics_port = 9400

[loads.nightly]
cluster = "agg"
output = "hdfs://nn:8020/x"
"""


def test_minimal_topology_defaults() -> None:
    topology = parse_topology(GOOD, Path("/etc/t.toml"))
    # No listeners, no [security]: one PLAINTEXT listener on `port`, as before listeners had names.
    east = topology.clusters["east"]
    assert [(listener.name, listener.protocol) for listener in east.listeners] == [("PLAINTEXT", "PLAINTEXT")]
    assert east.remote_listener == "PLAINTEXT"
    assert not east.authenticates and not east.tls
    assert dict(east.brokers[0].ports) == {"PLAINTEXT": 9092}
    assert east.bootstrap_on("PLAINTEXT") == east.bootstrap
    mirror = topology.mirrors["west"]
    assert (mirror.topics, mirror.exclude, mirror.group, mirror.instances) == (".*", "", "tributary-mirror-west", 1)
    assert mirror.host == "127.0.3.1"  # placed with the target cluster
    assert topology.clusters["agg"].zookeeper_connect == "127.0.3.1:2181"
    assert topology.loads["nightly"].master == "local[*]"
    assert topology.run_dir == Path("/etc/run/t")


def _error(text: str) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        parse_topology(text, Path("/tmp/t.toml"))
    return info.value


# (replace this, with that, the expected message, the line it must name)
MISTAKES = [
    ('source = "east"\ntarget', 'source = "wst"\ntarget', "mirror 'west' names unknown cluster 'wst'", 20),
    ('target = "agg"', 'target = "nowhere"', "mirror 'west' names unknown cluster 'nowhere'", 21),
    ('target = "agg"', 'target = "east"', "mirror 'west' has the same cluster 'east' as source and target", 21),
    ('cluster = "agg"\noutput', 'cluster = "agg2"\noutput', "load 'nightly' names unknown cluster 'agg2'", 25),
    ('datacenter = "agg"', 'datacenter = "ag"', "cluster 'agg' names unknown datacenter 'ag'", 15),
    ("{ id = 2, host", "{ id = 1, host", "cluster 'east' has two brokers with id 1", 11),
    ("port = 9093", "port = 99999", "cluster 'east': broker 2: 'port' must be an integer from 1 to 65535", 11),
    ('"127.0.3.1:2181"', '"127.0.3.1"', "cluster 'agg': zookeeper: server '127.0.3.1' is not HOST:PORT", 16),
    ('chroot = "/t/east"', 'chroot = "t/east"', "chroot 't/east' must look like /a/b", 7),
    ('"num.partitions" = 3', '"num.partitions" = 0', "setting 'num.partitions' must be >= 1", 8),
    ('"num.partitions" = 3', '"num.partitons" = 3', "unknown setting 'num.partitons'", 8),
    ("metrics_port = 9400", "metrics_port = 9400\ntopics = \"(\"", "'topics' is not a valid regular", 23),
    ("metrics_port = 9400", "metrics_port = 9400\ncolour = 1", "mirror 'west' has unknown key 'colour'", 23),
    ("metrics_port = 9308 }", "metrics_port = 9308, size = 3 }", "'east': broker #2 has unknown key 'size'", 11),
    ('output = "hdfs://nn:8020/x"', 'output = "file://x/y"', "must be file:///absolute/path", 26),
    ('output = "hdfs://nn:8020/x"', 'output = "ftp://x/y"', "is not a Hadoop FileSystem URI", 26),
    ('output = "hdfs://nn:8020/x"', "", "load 'nightly' needs 'output'", 24),
    ("[datacenters.agg]\nhadoop = true", "[datacenters.agg]\nhadoop = true\n[datacenters.x]\nhadoop = true",
     "only one datacenter may host Hadoop access", 5),
    ("[datacenters.east]", "[datacenters.east]\nhadoop = 1", "datacenter 'east': 'hadoop' must be true or false", 2),
    ("[mirrors.west]", "[mirrors.\"we.st\"]", "mirror alias name 'we.st' must be", 19),
    ("brokers = [{ id = 1, host = \"127.0.3.1\", port = 9092 }]", "brokers = []",
     "cluster 'agg' needs a non-empty list 'brokers'", 17),
    ('datacenter = "east"', 'datacenter = "east"\nlisteners = { IN = "PLAINTEXT", WAN = "SASL_SSL" }',
     "cluster 'east': broker 1 needs a port for listener WAN in 'ports'", 11),
    ('datacenter = "east"', 'datacenter = "east"\nlisteners = { IN = "PLAINTEXT", WAN = "SASL" }',
     "cluster 'east': listeners: WAN's protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", 7),
    ('datacenter = "east"', 'datacenter = "east"\nlisteners = { in = "PLAINTEXT", IN = "SSL" }',
     "cluster 'east': listeners: listener IN is named twice", 7),
    ('datacenter = "east"', 'datacenter = "east"\nlisteners = {}', "cluster 'east': listeners must name at least", 7),
    ('datacenter = "east"', 'datacenter = "east"\nremote_listener = "WAN"',
     "cluster 'east': 'remote_listener' names unknown listener WAN", 7),
    ("port = 9092 }", "port = 9092, ports = { WAN = 9192 } }", "cluster 'east': broker 1: 'ports' names unknown "
     "listener WAN", 10),
    ("port = 9092 }", "port = 9092, ports = { PLAINTEXT = 9192 } }", "listener PLAINTEXT is the first one: its port "
     "is 'port'", 10),
    ("[loads.nightly]", "[security]\nsasl_mechanism = \"GSSAPI\"\n[loads.nightly]",
     "'security': 'sasl_mechanism' must be one of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, got 'GSSAPI'", 25),
    ("[loads.nightly]", "[security]\nauthorizer = \"yes\"\n[loads.nightly]",
     "'security': 'authorizer' must be true or false", 25),
    # TOML puts a key below a header into that table.
    ("[clusters.east]", "extra = 1\n[clusters.east]", "datacenter 'agg' has unknown key 'extra'", 5),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "message", "line"), MISTAKES)
def test_mistake_is_named_with_its_line(old: str, new: str, message: str, line: int | None) -> None:
    assert old in GOOD
    error = _error(GOOD.replace(old, new, 1))
    assert message in str(error)
    if line is not None:
        assert error.line == line
        assert str(error).endswith(f"(line {line})")


def test_duplicate_address_names_the_second_one() -> None:
    error = _error(GOOD.replace("port = 9093", "port = 9092").replace('host = "127.0.1.2"', 'host = "127.0.1.1"'))
    assert "cluster 'east' broker 2 and cluster 'east' broker 1 both listen on 127.0.1.1:9092" in str(error)
    assert error.line == 11


SECURE = (
    GOOD.replace(
        'datacenter = "east"', 'datacenter = "east"\nlisteners = { internal = "PLAINTEXT", external = "SASL_SSL" }', 1
    )
    .replace("port = 9092 }", "port = 9092, ports = { EXTERNAL = 9192 } }", 1)
    .replace("port = 9093,", "port = 9093, ports = { external = 9193 },")
)


def test_listeners_have_kafkas_names_and_ports_of_their_own() -> None:
    east = parse_topology(SECURE, Path("/etc/t.toml")).clusters["east"]
    assert [listener.name for listener in east.listeners] == ["INTERNAL", "EXTERNAL"]  # case-insensitive
    assert east.local_listener.name == "INTERNAL"
    assert east.remote_listener == "EXTERNAL"  # the first SASL_SSL listener
    assert east.authenticates and east.tls
    assert east.bootstrap == "127.0.1.1:9092,127.0.1.2:9093"
    assert east.bootstrap_on("EXTERNAL") == "127.0.1.1:9192,127.0.1.2:9193"
    named = parse_topology(
        SECURE.replace('datacenter = "east"\n', 'datacenter = "east"\nremote_listener = "internal"\n', 1),
        Path("/etc/t.toml"),
    )
    assert named.clusters["east"].remote_listener == "INTERNAL"


def test_a_listener_port_taken_twice_is_named() -> None:
    error = _error(
        SECURE.replace("EXTERNAL = 9192", "EXTERNAL = 9093").replace('host = "127.0.1.2"', 'host = "127.0.1.1"')
    )
    assert "cluster 'east' broker 2 and cluster 'east' broker 1 listener EXTERNAL both listen on 127.0.1.1:9093" in str(
        error
    )


def test_top_level_unknown_key_line() -> None:
    error = _error("colour = 1\n" + GOOD)
    assert str(error).startswith("the topology has unknown key 'colour'")
    assert error.line == 1


def test_invalid_toml_keeps_tomllib_position() -> None:
    error = _error(GOOD + "\n[mirrors.west\n")
    assert "not valid TOML" in str(error)
    assert "line 28" in str(error)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=r"topology file .*nope.toml does not exist"):
        load_topology(tmp_path / "nope.toml")


FIND = """\
top = 1
[clusters.east]  # comment with brokers = [
datacenter = "east"
zookeeper = { servers = ["a:1"], chroot = "/x" }
brokers = [
    { id = 1, host = "h", port = 1, data_dir = "d{" },
    { id = 2, host = "h", port = 2 },
    { id = 3,
      host = "h", port = 3 },
]
[clusters."we.st"]
"datacenter" = "west"
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (["top"], 1),
        (["clusters", "east"], 2),
        (["clusters", "east", "datacenter"], 3),
        (["clusters", "east", "zookeeper", "chroot"], 4),
        (["clusters", "east", "brokers"], 5),
        (["clusters", "east", "brokers", 0, "port"], 6),
        (["clusters", "east", "brokers", 1], 7),
        (["clusters", "east", "brokers", 1, "port"], 7),
        (["clusters", "east", "brokers", 2, "port"], 9),
        # Missing in broker 2: the broker's own line, not broker 3's data_dir.
        (["clusters", "east", "brokers", 1, "data_dir"], 7),
        (["clusters", "east", "brokers", 7], 5),
        (["clusters", "we.st", "datacenter"], 12),
        (["clusters", "west"], None),
        (["nothing"], None),
    ],
)
def test_find_line(path: list[str | int], line: int | None) -> None:
    assert find_line(FIND, path) == line
