"""ACL nodes in Kafka's ZooKeeper layout: the paths and payloads Kafka's AclAuthorizer writes (as its
ZkData documents them), read and written byte for byte where Kafka fixes the bytes."""

from __future__ import annotations

import json

import pytest

from tributary.broker.security import acl_znodes as z
from tributary.protocol.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

READ_ALICE = AccessControlEntry("User:alice", "host1", AclOperation.READ, AclPermissionType.ALLOW)


def test_paths() -> None:
    assert z.resource_path(ResourcePattern(ResourceType.TOPIC, "topic-1")) == "/kafka-acl/Topic/topic-1"
    assert z.resource_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")) == "/kafka-acl/Cluster/kafka-cluster"
    prefixed = ResourcePattern(ResourceType.GROUP, "group-1", PatternType.PREFIXED)
    assert z.resource_path(prefixed) == "/kafka-acl-extended/prefixed/Group/group-1"
    assert z.resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx")) == "/kafka-acl/TransactionalId/tx"
    assert z.change_node_prefix(PatternType.LITERAL) == "/kafka-acl-changes/acl_changes_"
    assert z.change_node_prefix(PatternType.PREFIXED) == "/kafka-acl-extended-changes/acl_changes_"
    assert z.change_sequence("acl_changes_0000000042") == 42
    assert z.change_sequence("something-else") is None


def test_kafkas_acl_node_reads_and_ours_reads_back() -> None:
    # The example in Kafka's ZkData (spacing as there).
    kafkas = (
        b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow",'
        b'"operation": "Read","principal": "User:alice"}]}'
    )
    assert z.decode_acls(kafkas) == {READ_ALICE}
    ours = z.encode_acls({READ_ALICE})
    assert json.loads(ours) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "host1"}],
    }
    assert z.decode_acls(ours) == {READ_ALICE}
    describe_configs = AccessControlEntry("User:*", "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY)
    assert b'"operation":"DescribeConfigs"' in z.encode_acls({describe_configs})
    assert z.decode_acls(b"") == frozenset()


def test_change_events_as_kafka_writes_them() -> None:
    literal = ResourcePattern(ResourceType.TOPIC, "z_other")
    assert z.encode_change(literal) == b"TOPIC:z_other"
    assert z.decode_change(PatternType.LITERAL, b"Topic:z_other") == literal  # any case, as Kafka reads it
    prefixed = ResourcePattern(ResourceType.TOPIC, "z_other", PatternType.PREFIXED)
    event = json.loads(z.encode_change(prefixed))
    assert event == {"version": 1, "resourceType": "TOPIC", "name": "z_other", "patternType": "PREFIXED"}
    assert z.decode_change(PatternType.PREFIXED, z.encode_change(prefixed)) == prefixed
    # A name may hold the separator itself.
    assert z.decode_change(PatternType.LITERAL, b"GROUP:a:b") == ResourcePattern(ResourceType.GROUP, "a:b")


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"version":1}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Any","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"","permissionType":"Allow","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":["x"]}',
        b"\xff",
    ],
)
def test_malformed_acl_nodes_are_refused(data: bytes) -> None:
    with pytest.raises(z.MalformedAclNodeError):
        z.decode_acls(data)


@pytest.mark.parametrize(
    ("pattern_type", "data"),
    [
        (PatternType.LITERAL, b"no-separator"),
        (PatternType.LITERAL, b"Planet:x"),
        (PatternType.LITERAL, b"Any:x"),
        (PatternType.PREFIXED, b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"MATCH"}'),
        (PatternType.PREFIXED, b'{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}'),
    ],
)
def test_malformed_change_nodes_are_refused(pattern_type: PatternType, data: bytes) -> None:
    with pytest.raises(z.MalformedAclNodeError):
        z.decode_change(pattern_type, data)
