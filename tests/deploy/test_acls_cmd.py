"""``tributary acls``' command line turned into ACL bindings and filters as kafka-acls does it,
without a cluster (tests/broker/security/test_acls_live.py runs it against one)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tributary.deploy.cli.acls import plan_add, plan_list, plan_remove
from tributary.deploy.cli.admin_options import CommandError, command_security
from tributary.deploy.cli.main import build_parser
from tributary.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType

Op = AclOperation


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("acls").parse_args(["acls", "--bootstrap", "b:9092", *argv])


def plan(*argv: str) -> set[tuple[str, str, str, str, str, str, str]]:
    return {
        (b.pattern.resource_type.kafka_name, b.pattern.name, b.pattern.pattern_type.name, b.entry.principal,
         b.entry.host, b.entry.operation.kafka_name, b.entry.permission_type.kafka_name)
        for b in plan_add(parse("add", *argv))
    }  # fmt: skip


def test_operations_default_to_all_and_hosts_to_every_host() -> None:
    assert plan("--allow-principal", "User:alice", "--topic", "t") == {
        ("Topic", "t", "LITERAL", "User:alice", "*", "All", "Allow")
    }
    assert plan(
        "--allow-principal", "User:a", "--allow-principal", "User:b", "--allow-host", "10.0.0.1",
        "--deny-principal", "User:c", "--operation", "Read", "--operation", "describe", "--group", "g",
    ) == {
        ("Group", "g", "LITERAL", p, h, op, perm)
        for p, h, perm in (("User:a", "10.0.0.1", "Allow"), ("User:b", "10.0.0.1", "Allow"), ("User:c", "*", "Deny"))
        for op in ("Read", "Describe")
    }  # fmt: skip


def test_producer_and_consumer_expand_as_kafka_acls_does() -> None:
    producer = plan("--allow-principal", "User:p", "--producer", "--topic", "t", "--transactional-id", "x",
                    "--idempotent")  # fmt: skip
    assert {(r[0], r[1], r[5]) for r in producer} == {
        ("Topic", "t", "Write"), ("Topic", "t", "Describe"), ("Topic", "t", "Create"),
        ("TransactionalId", "x", "Write"), ("TransactionalId", "x", "Describe"),
        ("Cluster", "kafka-cluster", "IdempotentWrite"),
    }  # fmt: skip
    consumer = plan("--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g",
                    "--resource-pattern-type", "prefixed")  # fmt: skip
    assert {(r[0], r[1], r[2], r[5]) for r in consumer} == {
        ("Topic", "t", "PREFIXED", "Read"), ("Topic", "t", "PREFIXED", "Describe"), ("Group", "g", "PREFIXED", "Read")
    }  # fmt: skip
    # The Cluster is always one literal name.
    assert plan("--allow-principal", "User:x", "--cluster", "--operation", "Alter", "--resource-pattern-type",
                "prefixed") == {("Cluster", "kafka-cluster", "LITERAL", "User:x", "*", "Alter", "Allow")}  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--allow-principal", "User:a"), "name the resources"),
        (("--topic", "t"), "give --allow-principal or --deny-principal"),
        (("--allow-principal", "alice", "--topic", "t"), "'alice' is not a principal"),
        (("--allow-host", "h", "--deny-principal", "User:a", "--topic", "t"), "--allow-host needs --allow-principal"),
        (("--allow-principal", "User:a", "--group", "g", "--operation", "Write"), "Group does not have Write"),
        (("--allow-principal", "User:a", "--cluster", "--operation", "Read"), "Cluster does not have Read"),
        (("--allow-principal", "User:a", "--topic", "t", "--operation", "Any"), "not Any"),
        (("--allow-principal", "User:a", "--producer", "--group", "g"), "--producer needs --topic"),
        (("--allow-principal", "User:a", "--producer", "--topic", "t", "--operation", "Read"), "cannot be combined"),
        (("--allow-principal", "User:a", "--idempotent", "--topic", "t"), "--idempotent goes with --producer"),
    ],
)
def test_bad_command_lines_are_refused_naming_the_problem(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        plan_add(parse("add", *argv))


def test_remove_without_principals_removes_everything_of_the_resources() -> None:
    (only,) = plan_remove(parse("remove", "--topic", "t", "--resource-pattern-type", "any"))
    assert (only.pattern.resource_type, only.pattern.name, only.pattern.pattern_type) == (
        ResourceType.TOPIC, "t", PatternType.ANY
    )  # fmt: skip
    assert only.entry.principal is None and only.entry.operation == Op.ANY
    specific = plan_remove(parse("remove", "--topic", "t", "--deny-principal", "User:m", "--operation", "Write"))
    assert [(f.entry.principal, f.entry.host, f.entry.operation, f.entry.permission_type) for f in specific] == [
        ("User:m", "*", Op.WRITE, AclPermissionType.DENY)
    ]
    with pytest.raises(CommandError, match="or nothing to remove every ACL"):
        plan_remove(parse("remove", "--topic", "t", "--operation", "Read"))


def test_list_filters() -> None:
    (everything,) = plan_list(parse("list"))
    assert everything.pattern.resource_type == ResourceType.ANY and everything.pattern.pattern_type == PatternType.ANY
    by_principal = plan_list(parse("list", "--topic", "a", "--group", "g", "--principal", "User:x"))
    assert [(f.pattern.resource_type, f.pattern.name, f.entry.principal) for f in by_principal] == [
        (ResourceType.TOPIC, "a", "User:x"), (ResourceType.GROUP, "g", "User:x")
    ]  # fmt: skip


def test_command_config_is_a_properties_file(tmp_path: Path) -> None:
    """The one --command-config of the admin commands (acls, topics, groups, users): the
    cluster and the client's security settings (tests/client/test_security_settings.py)."""
    config = tmp_path / "client.properties"
    config.write_text("# the cluster\nbootstrap.servers = b1:9092,b2:9092\n\n! another comment\n")
    args = argparse.Namespace(command_config=config, bootstrap=None)
    assert command_security(args).protocol == "PLAINTEXT"
    assert args.bootstrap == "b1:9092,b2:9092"
    given = argparse.Namespace(command_config=config, bootstrap="b3:9092")
    command_security(given)
    assert given.bootstrap == "b3:9092"  # --bootstrap wins
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=u\nsasl.password=p\n"
    )
    assert command_security(argparse.Namespace(command_config=config, bootstrap=None)).sasl_username == "u"
    config.write_text("just words\n")
    with pytest.raises(CommandError, match="unknown security setting 'just'"):
        command_security(argparse.Namespace(command_config=config, bootstrap=None))
    with pytest.raises(CommandError, match="cannot read"):
        command_security(argparse.Namespace(command_config=tmp_path / "missing.properties", bootstrap=None))


def test_add_is_refused_for_an_unknown_pattern_type() -> None:
    with pytest.raises(SystemExit):
        parse("add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match")
