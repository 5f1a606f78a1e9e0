"""Which listener each link uses, and the users, super users and ACLs each cluster gets: pure
functions of the topology, shared by `tributary up` and the Ansible inventory."""

from __future__ import annotations

from pathlib import Path

from tributary.deploy.appliance.links import links
from tributary.deploy.appliance.principals import cluster_security
from tributary.deploy.appliance.topology import load_topology, parse_topology
from tributary.mirror.config import DEFAULT_OFFSETS_TOPIC
from tributary.protocol.acl import AclOperation as Op
from tributary.protocol.acl import PatternType, ResourceType

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def test_cross_datacenter_links_use_the_remote_listener_and_local_ones_the_local_one() -> None:
    topology = load_topology(EXAMPLES / "local.toml")
    described = [link.describe() for link in links(topology)]
    assert described == [
        "mirror east (source) -> east on EXTERNAL: SASL_SSL, cross-datacenter",
        "mirror east (target) -> aggregate on PLAINTEXT: PLAINTEXT, local",
        "mirror west (source) -> west on EXTERNAL: SASL_SSL, cross-datacenter",
        "mirror west (target) -> aggregate on PLAINTEXT: PLAINTEXT, local",
        "load nightly -> aggregate on PLAINTEXT: PLAINTEXT, local",
    ]
    (east_source, *_) = links(topology)
    assert east_source.bootstrap == "127.0.1.1:9192,127.0.1.2:9193,127.0.1.3:9194"
    assert east_source.user == "mirror-east"


def test_local_example_users_and_acls() -> None:
    topology = load_topology(EXAMPLES / "local.toml")
    east = cluster_security(topology, topology.clusters["east"])
    # Replication and applications are on the PLAINTEXT listener: no broker user; ANONYMOUS is
    # trusted there, and the mirror's login on EXTERNAL gets only what it needs.
    assert east.users == ("admin", "mirror-east")
    assert east.inter_broker_user is None
    assert east.super_users == ("User:admin", "User:ANONYMOUS")
    assert east.authorizer
    acls = {(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.operation) for b in east.bindings}
    assert acls == {
        (ResourceType.TOPIC, "*", PatternType.LITERAL, Op.READ),
        (ResourceType.TOPIC, "*", PatternType.LITERAL, Op.DESCRIBE),
        (ResourceType.TOPIC, "*", PatternType.LITERAL, Op.DESCRIBE_CONFIGS),
        (ResourceType.GROUP, "tributary-mirror-east", PatternType.LITERAL, Op.READ),
    }
    assert {b.entry.principal for b in east.bindings} == {"User:mirror-east"}
    # The aggregate has no listener that logs in: nothing to create there.
    aggregate = cluster_security(topology, topology.clusters["aggregate"])
    assert (aggregate.users, aggregate.super_users, aggregate.grants, aggregate.authorizer) == ((), (), (), False)


def test_an_aggregate_whose_only_listener_logs_in_restricts_every_component() -> None:
    topology = load_topology(EXAMPLES / "production.toml")
    aggregate = cluster_security(topology, topology.clusters["aggregate"])
    assert aggregate.users == ("broker-aggregate", "admin", "mirror-use1", "mirror-euw1", "loader-nightly")
    assert aggregate.inter_broker_user == "broker-aggregate"
    assert aggregate.super_users == ("User:broker-aggregate", "User:admin")  # no ANONYMOUS: nothing trusts it
    granted = {
        (b.entry.principal, b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.operation)
        for b in aggregate.bindings
    }
    mirror_topics = {
        ("User:mirror-use1", ResourceType.TOPIC, "use1.", PatternType.PREFIXED, op)
        for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.ALTER)
    }
    offsets = {
        ("User:mirror-use1", ResourceType.TOPIC, DEFAULT_OFFSETS_TOPIC, PatternType.LITERAL, op)
        for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE)
    }
    group = {("User:mirror-use1", ResourceType.GROUP, "tributary-mirror-use1", PatternType.LITERAL, Op.READ)}
    loader = {
        ("User:loader-nightly", ResourceType.TOPIC, prefix, PatternType.PREFIXED, op)
        for prefix in ("use1.", "euw1.")
        for op in (Op.READ, Op.DESCRIBE)
    }
    mine = {g for g in granted if g[0] in ("User:mirror-use1", "User:loader-nightly")}
    assert mine == mirror_topics | offsets | group | loader
    # Nothing for one mirror on the other's topics.
    assert not any(g[0] == "User:mirror-euw1" and g[2] == "use1." for g in granted)
    # The grants are what `tributary acls add` would be told (Ansible runs exactly these).
    first = aggregate.grants[0]
    assert first.acls_arguments() == [
        "--allow-principal", "User:mirror-use1",
        "--operation", "Read", "--operation", "Write", "--operation", "Create", "--operation", "Describe",
        "--operation", "Alter",
        "--topic", "use1.", "--resource-pattern-type", "prefixed",
    ]  # fmt: skip


def test_without_an_authorizer_users_but_no_acls() -> None:
    text = (EXAMPLES / "local.toml").read_text().replace("authorizer = true", "authorizer = false")
    topology = parse_topology(text, EXAMPLES / "local.toml")
    east = cluster_security(topology, topology.clusters["east"])
    assert east.users == ("admin", "mirror-east")
    assert (east.authorizer, east.grants) == (False, ())


def test_a_load_on_a_cluster_no_mirror_feeds_reads_every_topic() -> None:
    text = (EXAMPLES / "production.toml").read_text().replace('cluster = "aggregate"', 'cluster = "us-east"')
    topology = parse_topology(text, EXAMPLES / "production.toml")
    (link,) = [link for link in links(topology) if link.role == "load"]
    assert link.describe() == "load nightly -> us-east on EXTERNAL: SASL_SSL, cross-datacenter"
    us_east = cluster_security(topology, topology.clusters["us-east"])
    loader = {
        (b.pattern.name, b.entry.operation) for b in us_east.bindings if b.entry.principal == "User:loader-nightly"
    }
    assert loader == {("*", Op.READ), ("*", Op.DESCRIBE)}
