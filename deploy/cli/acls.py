"""``tributary acls``: list, add and remove ACLs of any Kafka-compatible cluster, with kafka-acls'
options.

    tributary acls --bootstrap B [--command-config FILE] [--output table|json] list
        [--topic T ...] [--group G ...] [--cluster] [--transactional-id X ...]
        [--resource-pattern-type any|match|literal|prefixed] [--principal P ...]
    tributary acls --bootstrap B add (--allow-principal P ... | --deny-principal P ...)
        [--allow-host H ...] [--deny-host H ...] (--operation OP ... | --producer [--idempotent] | --consumer)
        (--topic T ... | --group G ... | --cluster | --transactional-id X ...)
        [--resource-pattern-type literal|prefixed]
    tributary acls --bootstrap B remove [the same options] [--force]
    tributary acls --zookeeper HOST:PORT[/chroot] list|add|remove ...   (before any broker runs)

As kafka-acls: hosts default to ``*`` for the principals given; operations to ``All``;
``--producer`` is Write, Describe and Create on the topics (Write and Describe on transactional
ids, IdempotentWrite on the Cluster with ``--idempotent``), ``--consumer`` Read and Describe on
the topics and Read on the groups; ``remove`` without principals removes every ACL of the
resources; ``list`` without resources lists every ACL. ``remove`` asks for confirmation unless
given ``--force``. What ``add`` and ``remove`` did is printed as the table (or JSON) ``list`` shows.

``--command-config FILE`` takes a Kafka client properties file, as Kafka's tools do: the client's
security settings, and ``bootstrap.servers`` (used when ``--bootstrap`` is not given); see
admin_options.py.

``--zookeeper HOST:PORT[/chroot]`` (or kafka-acls' ``--authorizer-properties
zookeeper.connect=HOST:PORT[/chroot]``) reads and writes the ACLs in the cluster's ZooKeeper
instead (acls_zookeeper.py): the first ACLs, before any broker runs. There ``add`` also says how
many of the ACLs were new.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from tributary.deploy.cli.acls_zookeeper import ZkAcls, run_zookeeper, zookeeper_connect
from tributary.deploy.cli.admin_options import FAILED, USAGE, CommandError, add_common_arguments, run_admin
from tributary.deploy.tables import render_table, to_json
from tributary.protocol.acl import (
    CLUSTER_NAME,
    OPERATIONS_OF,
    WILDCARD_HOST,
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
)

Op = AclOperation


class AclAdmin(Protocol):
    """What list, add and remove need: an Admin on a cluster, or ZkAcls on its ZooKeeper."""

    async def describe_acls(self, binding_filter: AclBindingFilter = ...) -> list[AclBinding]: ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None: ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]: ...


#: The operations each resource type has, as kafka-acls checks them: Kafka's list, and All.
SUPPORTED_OPERATIONS = {kind: ops | {Op.ALL} for kind, ops in OPERATIONS_OF.items()}


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "acls",
        help="list, add and remove ACLs (kafka-acls' options)",
        description="ACLs of a Kafka-compatible cluster, with kafka-acls' options.",
    )
    add_common_arguments(parser)
    _add_zookeeper_arguments(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the ACLs of the resources (default: every ACL)")
    _add_resources(listing, ("any", "match", "literal", "prefixed"))
    listing.add_argument(
        "--principal", action="append", default=[], metavar="TYPE:NAME", help="only the ACLs of this principal"
    )
    listing.set_defaults(func=run_list)

    add = actions.add_parser("add", help="add ACLs")
    remove = actions.add_parser("remove", help="remove ACLs (asks first, unless --force)")
    for action, patterns in ((add, ("literal", "prefixed")), (remove, ("any", "match", "literal", "prefixed"))):
        _add_resources(action, patterns)
        _add_entries(action)
    add.set_defaults(func=run_add)
    remove.add_argument("--force", action="store_true", help="remove without asking")
    remove.set_defaults(func=run_remove)

    for action in (listing, add, remove):
        add_common_arguments(action, suppress=True)
        _add_zookeeper_arguments(action, suppress=True)


def _add_zookeeper_arguments(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    parser.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        default=argparse.SUPPRESS if suppress else None,
        help="the cluster's ZooKeeper: read and write the ACLs there directly (before any broker runs)",
    )
    parser.add_argument(
        "--authorizer-properties",
        action="append",
        metavar="zookeeper.connect=HOST:PORT[/chroot]",
        default=argparse.SUPPRESS if suppress else [],
        help="kafka-acls' spelling of --zookeeper",
    )


def _add_resources(parser: argparse.ArgumentParser, patterns: Sequence[str]) -> None:
    resources = parser.add_argument_group("resources")
    resources.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (* for all)")
    resources.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group (* for all)")
    resources.add_argument("--cluster", action="store_true", help="the Cluster")
    resources.add_argument(
        "--transactional-id", action="append", default=[], metavar="ID", help="a transactional id (* for all)"
    )
    resources.add_argument(
        "--resource-pattern-type",
        type=str.lower,
        choices=patterns,
        default="literal",
        help="how the names match: literally (default) or as prefixes"
        + ("; any: either; match: every pattern that applies to the names" if "any" in patterns else ""),
    )


def _add_entries(parser: argparse.ArgumentParser) -> None:
    entries = parser.add_argument_group("entries")
    entries.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    entries.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    entries.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="default: * (every host)")
    entries.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="default: * (every host)")
    entries.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
        "IdempotentWrite or All (the default)",
    )
    entries.add_argument("--producer", action="store_true", help="what a producer needs on the topics")
    entries.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the Cluster")
    entries.add_argument("--consumer", action="store_true", help="what a consumer needs on the topics and groups")


# --- turning options into bindings and filters (no cluster needed) ---------------------------------


def _pattern_type(args: argparse.Namespace) -> PatternType:
    return PatternType.parse(args.resource_pattern_type)


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    named = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    named += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return list(dict.fromkeys(named))


def _pattern(args: argparse.Namespace, kind: ResourceType, name: str) -> ResourcePattern:
    # The Cluster has one name: it is always a LITERAL pattern.
    pattern_type = PatternType.LITERAL if kind == ResourceType.CLUSTER else _pattern_type(args)
    return ResourcePattern(kind, name, pattern_type)


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    try:
        operations = [AclOperation.parse(op) for op in args.operation] or [AclOperation.ALL]
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if any(op in (AclOperation.ANY, AclOperation.UNKNOWN) for op in operations):
        raise CommandError("--operation names an operation (Read, Write, ... or All), not Any")
    return operations


#: What --producer and --consumer grant, by resource type (kafka-acls' expansion).
PRODUCER: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.WRITE, Op.DESCRIBE, Op.CREATE),
    ResourceType.TRANSACTIONAL_ID: (Op.WRITE, Op.DESCRIBE),
}
CONSUMER: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.DESCRIBE),
    ResourceType.GROUP: (Op.READ,),
}


def _convenience_operations(args: argparse.Namespace) -> dict[tuple[ResourceType, str], list[AclOperation]]:
    if args.operation:
        raise CommandError("--operation cannot be combined with --producer or --consumer")
    if args.producer and not args.topic:
        raise CommandError("--producer needs --topic")
    if args.consumer and not (args.topic and args.group):
        raise CommandError("--consumer needs --topic and --group")
    plan: dict[tuple[ResourceType, str], list[AclOperation]] = {}
    for kind, name in resources(args):
        ops = (PRODUCER.get(kind, ()) if args.producer else ()) + (CONSUMER.get(kind, ()) if args.consumer else ())
        if ops:
            plan[kind, name] = list(dict.fromkeys(ops))
    if args.producer and args.idempotent:
        plan[ResourceType.CLUSTER, CLUSTER_NAME] = [Op.IDEMPOTENT_WRITE]
    return plan


def _operations_by_resource(args: argparse.Namespace) -> dict[tuple[ResourceType, str], list[AclOperation]]:
    """Which operations go on which resource: --producer and --consumer as kafka-acls expands them,
    else every --operation on every resource (checked against what each type supports)."""
    if args.producer or args.consumer:
        return _convenience_operations(args)
    if args.idempotent:
        raise CommandError("--idempotent goes with --producer")
    operations = _operations(args)
    named = resources(args)
    for kind, _ in named:
        unsupported = [op.kafka_name for op in operations if op not in SUPPORTED_OPERATIONS[kind]]
        if unsupported:
            supported = ", ".join(sorted(op.kafka_name for op in SUPPORTED_OPERATIONS[kind]))
            raise CommandError(f"{kind.kafka_name} does not have {', '.join(unsupported)} (it has: {supported})")
    return {resource: operations for resource in named}


def _principals(values: Iterable[str], option: str) -> list[str]:
    out = []
    for value in values:
        kind, sep, name = value.partition(":")
        if not sep or not kind or not name:
            raise CommandError(f"{option} {value!r} is not a principal: TYPE:NAME, e.g. User:alice")
        out.append(value)
    return out


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) from --allow-/--deny-principal and -host, hosts defaulting to *."""
    if args.allow_host and not args.allow_principal:
        raise CommandError("--allow-host needs --allow-principal")
    if args.deny_host and not args.deny_principal:
        raise CommandError("--deny-host needs --deny-principal")
    entries = []
    for principals, hosts, permission in (
        (_principals(args.allow_principal, "--allow-principal"), args.allow_host, AclPermissionType.ALLOW),
        (_principals(args.deny_principal, "--deny-principal"), args.deny_host, AclPermissionType.DENY),
    ):
        entries += [(p, h, permission) for p in principals for h in (hosts or [WILDCARD_HOST])]
    return entries


def plan_add(args: argparse.Namespace) -> list[AclBinding]:
    if not resources(args):
        raise CommandError("name the resources: --topic, --group, --cluster or --transactional-id")
    entries = _entries(args)
    if not entries:
        raise CommandError("give --allow-principal or --deny-principal")
    return [
        AclBinding(_pattern(args, kind, name), AccessControlEntry(principal, host, op, permission))
        for (kind, name), operations in _operations_by_resource(args).items()
        for principal, host, permission in entries
        for op in operations
    ]


def plan_remove(args: argparse.Namespace) -> list[AclBindingFilter]:
    """Filters for what ``remove`` removes: the ACLs the options describe, or (no principal
    given) every ACL of the resources."""
    if not resources(args):
        raise CommandError("name the resources: --topic, --group, --cluster or --transactional-id")
    if not (args.allow_principal or args.deny_principal):
        if args.operation or args.producer or args.consumer or args.allow_host or args.deny_host:
            raise CommandError("give --allow-principal or --deny-principal, or nothing to remove every ACL")
        return [_resource_filter(args, kind, name) for kind, name in resources(args)]
    entries = _entries(args)
    return [
        AclBindingFilter(
            _resource_filter(args, kind, name).pattern, AccessControlEntryFilter(principal, host, op, permission)
        )
        for (kind, name), operations in _operations_by_resource(args).items()
        for principal, host, permission in entries
        for op in operations
    ]


def _resource_filter(args: argparse.Namespace, kind: ResourceType, name: str) -> AclBindingFilter:
    pattern_type = PatternType.LITERAL if kind == ResourceType.CLUSTER else _pattern_type(args)
    return AclBindingFilter(ResourcePatternFilter(kind, name, pattern_type))


def plan_list(args: argparse.Namespace) -> list[AclBindingFilter]:
    principals: list[str | None] = [*_principals(args.principal, "--principal")] or [None]
    named = resources(args)
    patterns = (
        [_resource_filter(args, kind, name).pattern for kind, name in named]
        if named
        else [ResourcePatternFilter(pattern_type=PatternType.ANY)]
    )
    return [AclBindingFilter(p, AccessControlEntryFilter(principal=who)) for p in patterns for who in principals]


# --- running ---------------------------------------------------------------------------------------


def _rows(bindings: Iterable[AclBinding]) -> list[dict[str, str]]:
    return [
        {
            "resource_type": b.pattern.resource_type.kafka_name,
            "name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name,
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": b.entry.operation.kafka_name,
            "permission": b.entry.permission_type.kafka_name,
        }
        for b in sorted(set(bindings))
    ]


def _print(args: argparse.Namespace, bindings: Iterable[AclBinding], empty: str) -> None:
    rows = _rows(bindings)
    if args.output == "json":
        print(to_json(rows))
    elif not rows:
        print(empty)
    else:
        headers = ("RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
        print(render_table(headers, [tuple(row.values()) for row in rows]))


def _dispatch(args: argparse.Namespace, operation: Any) -> int:
    """``operation(admin)`` through the Kafka API, or on the ACLs in ZooKeeper."""
    try:
        hosts = zookeeper_connect(args.zookeeper, args.authorizer_properties)
    except CommandError as exc:
        print(f"tributary acls: error: {exc}", file=sys.stderr)
        return exc.status
    if hosts is None:
        return run_admin(args, operation)
    if args.bootstrap or args.command_config:
        print("tributary acls: error: --zookeeper goes without --bootstrap and --command-config", file=sys.stderr)
        return USAGE
    try:
        return run_zookeeper(hosts, operation, min(args.timeout, 10.0))
    except CommandError as exc:
        print(f"tributary acls: error: {exc}", file=sys.stderr)
        return exc.status


def _run(args: argparse.Namespace, plan: Any, operation: Any) -> int:
    try:
        planned = plan(args)
    except CommandError as exc:
        print(f"tributary acls: error: {exc}", file=sys.stderr)
        return exc.status
    return _dispatch(args, lambda admin: operation(admin, planned))


def run_list(args: argparse.Namespace) -> int:
    async def operation(admin: AclAdmin, filters: list[AclBindingFilter]) -> int:
        found: list[AclBinding] = []
        for binding_filter in filters:
            found += await admin.describe_acls(binding_filter)
        _print(args, found, "no ACLs")
        return 0

    return _run(args, plan_list, operation)


def run_add(args: argparse.Namespace) -> int:
    async def operation(admin: AclAdmin, bindings: list[AclBinding]) -> int:
        await admin.create_acls(bindings)
        _print(args, bindings, "no ACLs")
        if isinstance(admin, ZkAcls) and args.output == "table":
            print(f"{admin.added} of {len(set(bindings))} ACLs new in ZooKeeper")
        return 0

    return _run(args, plan_add, operation)


def _confirmed(filters: Sequence[AclBindingFilter]) -> bool:
    resources = sorted({f"{f.pattern.resource_type.kafka_name}:{f.pattern.name}" for f in filters})
    print(f"Remove ACLs of {', '.join(resources)}? (y/n) ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def run_remove(args: argparse.Namespace) -> int:
    async def operation(admin: AclAdmin, filters: list[AclBindingFilter]) -> int:
        removed = await admin.delete_acls(filters)
        _print(args, [b for found in removed for b in found], "no ACLs matched: nothing removed")
        return 0

    try:
        filters = plan_remove(args)
    except CommandError as exc:
        print(f"tributary acls: error: {exc}", file=sys.stderr)
        return exc.status
    if not args.force and not _confirmed(filters):
        print("tributary acls: nothing removed (answer y, or give --force)", file=sys.stderr)
        return FAILED
    return _dispatch(args, lambda admin: operation(admin, filters))
