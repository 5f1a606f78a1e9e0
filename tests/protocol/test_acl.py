"""Kafka's ACL model: codes and names as Kafka's enums have them, filters matching as Kafka's
ResourcePatternFilterTest and AclBindingFilterTest say, and what a stored binding must be."""

from __future__ import annotations

import pytest

from tributary.protocol.acl import (
    ANY_BINDING,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    binding_error,
    filter_error,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH


def test_codes_are_kafkas() -> None:
    # org.apache.kafka.common.resource.ResourceType / PatternType, common.acl.AclOperation / AclPermissionType.
    assert [(t.name, int(t)) for t in ResourceType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4), ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6), ("USER", 7),
    ]  # fmt: skip
    assert [int(p) for p in (PatternType.UNKNOWN, ANY, MATCH, LITERAL, PREFIXED)] == [0, 1, 2, 3, 4]
    assert int(AclOperation.IDEMPOTENT_WRITE) == 12 and int(AclOperation.CLUSTER_ACTION) == 9
    assert int(AclOperation.DESCRIBE_CONFIGS) == 10 and int(AclOperation.ALL) == 2
    assert [int(p) for p in AclPermissionType] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DescribeConfigs", AclOperation.DESCRIBE_CONFIGS),
        ("DESCRIBE_CONFIGS", AclOperation.DESCRIBE_CONFIGS),
        ("describe-configs", AclOperation.DESCRIBE_CONFIGS),
        ("IdempotentWrite", AclOperation.IDEMPOTENT_WRITE),
        ("all", AclOperation.ALL),
    ],
)
def test_operation_names_parse_in_any_spelling(text: str, expected: AclOperation) -> None:
    assert AclOperation.parse(text) == expected


def test_kafka_names_and_unknown_names() -> None:
    assert ResourceType.TRANSACTIONAL_ID.kafka_name == "TransactionalId"
    assert AclOperation.CLUSTER_ACTION.kafka_name == "ClusterAction"
    assert AclPermissionType.parse("Allow") == AclPermissionType.ALLOW
    with pytest.raises(ValueError, match=r"unknown AclOperation 'Fly' \(known: Any, All, Read"):
        AclOperation.parse("Fly")
    assert ResourceType.from_code(99) == ResourceType.UNKNOWN


@pytest.mark.parametrize(
    ("filter_", "pattern", "matches"),
    [
        # ResourcePatternFilterTest, case for case.
        (ResourcePatternFilter(TOPIC, "Name", LITERAL), ResourcePattern(GROUP, "Name", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "Name", LITERAL), ResourcePattern(TOPIC, "Different", PREFIXED), False),
        (ResourcePatternFilter(TOPIC, "Name", LITERAL), ResourcePattern(TOPIC, "NAME", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "Name", LITERAL), ResourcePattern(TOPIC, "Name", PREFIXED), False),
        (ResourcePatternFilter(ResourceType.ANY, "Name", LITERAL), ResourcePattern(TOPIC, "Name", LITERAL), True),
        (ResourcePatternFilter(TOPIC, None, LITERAL), ResourcePattern(TOPIC, "Name", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "Name", ANY), ResourcePattern(TOPIC, "Name", PREFIXED), True),
        (ResourcePatternFilter(TOPIC, "Name", MATCH), ResourcePattern(TOPIC, "Name", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "Name", LITERAL), ResourcePattern(TOPIC, "Name", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "Name", ANY), ResourcePattern(TOPIC, "Name", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "Name-something", LITERAL), ResourcePattern(TOPIC, "Name", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "*", LITERAL), ResourcePattern(TOPIC, "*", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "Name", LITERAL), ResourcePattern(TOPIC, "*", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "*", LITERAL), ResourcePattern(TOPIC, "Name", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "Name", ANY), ResourcePattern(TOPIC, "*", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "Name", MATCH), ResourcePattern(TOPIC, "*", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "Name", PREFIXED), ResourcePattern(TOPIC, "Name", PREFIXED), True),
        (ResourcePatternFilter(TOPIC, "Name", PREFIXED), ResourcePattern(TOPIC, "Name-something", PREFIXED), False),
        (ResourcePatternFilter(TOPIC, "Name-something", PREFIXED), ResourcePattern(TOPIC, "Name", PREFIXED), False),
        (ResourcePatternFilter(TOPIC, "Name-something", ANY), ResourcePattern(TOPIC, "Name", PREFIXED), False),
        (ResourcePatternFilter(TOPIC, "Name-something", MATCH), ResourcePattern(TOPIC, "Name", PREFIXED), True),
    ],
)
def test_resource_pattern_filter(filter_: ResourcePatternFilter, pattern: ResourcePattern, matches: bool) -> None:
    assert filter_.matches(pattern) is matches


def test_entry_filter_is_plain_equality() -> None:
    entry = AccessControlEntry("User:alice", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)
    assert AccessControlEntryFilter().matches(entry)
    assert AccessControlEntryFilter("User:alice", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW).matches(entry)
    # No implications and no wildcards in filters: User:* and * are values like any other.
    assert not AccessControlEntryFilter(principal="User:*").matches(entry)
    assert not AccessControlEntryFilter(host="*").matches(entry)
    assert not AccessControlEntryFilter(operation=AclOperation.DESCRIBE).matches(entry)
    assert not AccessControlEntryFilter(permission_type=AclPermissionType.DENY).matches(entry)
    assert ANY_BINDING.matches(AclBinding(ResourcePattern(TOPIC, "t"), entry))


def binding(**changes: object) -> AclBinding:
    wire: dict[str, object] = {
        "resource_type": 2, "name": "orders", "pattern_type": 3, "principal": "User:alice", "host": "*",
        "operation": 3, "permission": 3,
    }  # fmt: skip
    wire.update(changes)
    return AclBinding.from_wire(**wire)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({}, None),
        ({"pattern_type": 4}, None),
        ({"resource_type": 4, "name": "kafka-cluster"}, None),
        ({"resource_type": 1}, "resource type ANY is not a resource"),
        ({"resource_type": 42}, "resource type UNKNOWN is not a resource"),
        ({"pattern_type": 2}, "pattern type MATCH is for filters"),
        ({"pattern_type": 1}, "pattern type ANY is for filters"),
        ({"operation": 1}, "operation ANY is for filters"),
        ({"operation": 99}, "operation UNKNOWN"),
        ({"permission": 1}, "permission type ANY is for filters"),
        ({"name": ""}, "the resource name is empty"),
        ({"name": "a/b"}, "contains '/'"),
        ({"resource_type": 4, "name": "other"}, "the only name of the Cluster resource is 'kafka-cluster'"),
        ({"principal": "alice"}, "is not of the form TYPE:NAME"),
        ({"host": ""}, "the host is empty"),
    ],
)
def test_what_a_stored_binding_must_be(changes: dict[str, object], why: str | None) -> None:
    error = binding_error(binding(**changes))
    if why is None:
        assert error is None
    else:
        assert error is not None and why in error


def test_filters_refuse_unknown_codes_only() -> None:
    wildcard = AclBindingFilter.from_wire(
        resource_type=1, name=None, pattern_type=1, principal=None, host=None, operation=1, permission=1
    )
    assert wildcard == ANY_BINDING and filter_error(wildcard) is None
    unknown = AclBindingFilter.from_wire(
        resource_type=2, name=None, pattern_type=9, principal=None, host=None, operation=1, permission=1
    )
    assert filter_error(unknown) == "the filter has an unknown PatternType (code 0)"
