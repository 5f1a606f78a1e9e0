"""Where ACLs live in ZooKeeper and in what shape: Kafka's ZooKeeper-mode layout, so that its tools
(``kafka-acls --authorizer-properties zookeeper.connect=...``) and Tributary read each other's ACLs.

::

    /kafka-acl/<ResourceType>/<name>                       LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>     PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                              "operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                   "Topic:orders" (a LITERAL pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq>          {"version":1,"resourceType":"Topic",
                                                             "name":"orders-","patternType":"PREFIXED"}

A writer changes a resource's node (compare-and-set on its version; the node goes when its last
ACL does), then adds a sequential change node naming the resource; every broker watches the two
change paths and re-reads the resources named there. Change nodes are removed after
:data:`CHANGE_EXPIRATION_MS`, by whichever broker sees them that old.

Decoders raise :class:`MalformedAclNodeError`: a node a foreign tool wrote badly is skipped with a
log line, never fatal. Names are read in any case (Kafka writes ``TOPIC`` in change events and
``Topic`` in paths).
"""

from __future__ import annotations

import json
from typing import Any

from tributary.protocol.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
PREFIXED_ROOT = f"{EXTENDED_ROOT}/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: The roots under which ACLs are stored, by pattern type.
ROOTS = {PatternType.LITERAL: LITERAL_ROOT, PatternType.PREFIXED: PREFIXED_ROOT}
#: Created at start so that there is something to watch and list.
PERSISTENT_PATHS = (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES)
#: Kafka's ZkNodeChangeNotificationListener deletes change nodes older than this.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ACLS_VERSION = 1
CHANGE_EVENT_VERSION = 1


class MalformedAclNodeError(ValueError):
    """An ACL node, change node or path that is not in Kafka's shape."""


def _forbidden(ch: str) -> bool:
    # ZooKeeper's PathUtils.validatePath: control characters, surrogates and private use, and
    # the last sixteen code points of the basic plane.
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xF8FF or 0xFFF0 <= code <= 0xFFFF


def name_error(name: str) -> str | None:
    """Why ``name`` cannot be a ZooKeeper node under a resource type, or None. Kafka does not check
    (ZooKeeper refuses the write); checking first gives the creation a clear reason."""
    if name in (".", ".."):
        return f"resource name {name!r} cannot be a ZooKeeper node"
    if any(_forbidden(ch) for ch in name):
        return f"resource name {name!r} holds a character ZooKeeper does not allow in a node name"
    return None


def resource_path(pattern: ResourcePattern) -> str:
    return f"{ROOTS[pattern.pattern_type]}/{pattern.resource_type.kafka_name}/{pattern.name}"


def type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{ROOTS[pattern_type]}/{resource_type.kafka_name}"


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES


def change_node_prefix(pattern_type: PatternType) -> str:
    """What a sequential change node is created as (ZooKeeper appends the sequence number)."""
    return f"{changes_path(pattern_type)}/{CHANGE_PREFIX}"


def change_sequence(child: str) -> int | None:
    """The sequence number of a change node's name, or None when it is not one."""
    if not child.startswith(CHANGE_PREFIX):
        return None
    digits = child[len(CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def resource_type_of(segment: str) -> ResourceType:
    """A resource type as a path segment names it; MalformedAclNodeError when unknown."""
    try:
        kind = ResourceType.parse(segment)
    except ValueError as exc:
        raise MalformedAclNodeError(str(exc)) from None
    if kind in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise MalformedAclNodeError(f"{segment!r} is not a resource type")
    return kind


def encode_acls(entries: set[AccessControlEntry] | frozenset[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission_type.kafka_name,
            "operation": e.operation.kafka_name,
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"version": ACLS_VERSION, "acls": acls}, separators=(",", ":")).encode()


def _load(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedAclNodeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise MalformedAclNodeError("not a JSON object")
    return value


def _string(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise MalformedAclNodeError(f"{key!r} is not a non-empty string: {value!r}")
    return value


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    """The entries of a resource node (an empty node, as a foreign tool may leave, has none)."""
    if not data:
        return frozenset()
    value = _load(data)
    acls = value.get("acls")
    if not isinstance(acls, list):
        raise MalformedAclNodeError(f"'acls' is not a list: {acls!r}")
    entries = set()
    for item in acls:
        if not isinstance(item, dict):
            raise MalformedAclNodeError(f"an ACL is not a JSON object: {item!r}")
        try:
            operation = AclOperation.parse(_string(item, "operation"))
            permission = AclPermissionType.parse(_string(item, "permissionType"))
        except ValueError as exc:
            raise MalformedAclNodeError(str(exc)) from None
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN) or permission not in (
            AclPermissionType.ALLOW,
            AclPermissionType.DENY,
        ):
            raise MalformedAclNodeError(f"not a stored ACL: {item!r}")
        entries.add(AccessControlEntry(_string(item, "principal"), _string(item, "host"), operation, permission))
    return frozenset(entries)


def encode_change(pattern: ResourcePattern) -> bytes:
    """A change node's payload naming ``pattern``, as Kafka writes it."""
    if pattern.pattern_type == PatternType.LITERAL:
        # Kafka's LiteralAclChangeStore: the enum's name, then the resource name.
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": CHANGE_EVENT_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(event, separators=(",", ":")).encode()


def decode_change(pattern_type: PatternType, data: bytes) -> ResourcePattern:
    """The pattern a change node under ``changes_path(pattern_type)`` names."""
    if pattern_type == PatternType.LITERAL:
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            raise MalformedAclNodeError(f"not UTF-8: {exc}") from None
        kind, sep, name = text.partition(":")
        if not sep or not name:
            raise MalformedAclNodeError(f"expected ResourceType:name, got {text!r}")
        return ResourcePattern(resource_type_of(kind), name, PatternType.LITERAL)
    value = _load(data)
    try:
        found = PatternType.parse(_string(value, "patternType"))
    except ValueError as exc:
        raise MalformedAclNodeError(str(exc)) from None
    if found not in ROOTS:
        raise MalformedAclNodeError(f"pattern type {found.name} is not stored")
    return ResourcePattern(resource_type_of(_string(value, "resourceType")), _string(value, "name"), found)
