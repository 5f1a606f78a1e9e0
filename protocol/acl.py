"""Kafka's ACL model: resources, patterns, operations, permissions, bindings and their filters.

What DescribeAcls, CreateAcls and DeleteAcls carry, with the codes and names of Apache Kafka's
``org.apache.kafka.common.acl`` and ``org.apache.kafka.common.resource`` packages (as there, the
model is shared by the client, which builds requests, and the broker, which stores and matches
them). An ACL binding is a resource pattern (``Topic`` ``orders``, LITERAL) and an access control
entry (``User:alice`` from host ``*`` may ``Read``: ALLOW).

Each enum has UNKNOWN (a code this side does not know) and, where filters use them, ANY and MATCH;
a binding that is stored must be fully specific (:func:`binding_error`). Names parse the way
Kafka's tools accept them: any case, with or without underscores (``DescribeConfigs``,
``DESCRIBE_CONFIGS``, ``describe-configs``). Whether an operation *implies* another (Read implies
Describe) is the authorizer's business, not the model's: see ``broker.security.authorizer``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

#: A literal resource named ``*`` matches every resource of its type.
WILDCARD_RESOURCE = "*"
#: An entry for ``User:*`` applies to every principal.
WILDCARD_PRINCIPAL = "User:*"
#: An entry for host ``*`` applies from every host.
WILDCARD_HOST = "*"
#: The one name of the Cluster resource.
CLUSTER_NAME = "kafka-cluster"


def _normalized(text: str) -> str:
    return text.replace("_", "").replace("-", "").lower()


class _Named(IntEnum):
    """An enum with Kafka's display name (``TransactionalId``) and a forgiving parser."""

    @property
    def kafka_name(self) -> str:
        """Kafka's name: ``DESCRIBE_CONFIGS`` -> ``DescribeConfigs`` (SecurityUtils' form,
        as ZooKeeper's ACL nodes and kafka-acls' output spell them)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls: type[_E], text: str) -> _E:
        """The member named ``text`` in any case, with or without underscores; ValueError otherwise."""
        wanted = _normalized(text)
        for member in cls:
            if _normalized(member.name) == wanted:
                return member
        known = ", ".join(m.kafka_name for m in cls if m.name != "UNKNOWN")
        raise ValueError(f"unknown {cls.__name__} {text!r} (known: {known})")

    @classmethod
    def from_code(cls: type[_E], code: int) -> _E:
        """The member with this wire code, UNKNOWN for a code this side does not know."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


_E = TypeVar("_E", bound=_Named)


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    #: Filters only: a pattern of any type whose name equals the filter's.
    ANY = 1
    #: Filters only: every pattern that would match a resource of the filter's name (the
    #: literal name, the wildcard, every prefix of it).
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    #: Filters only.
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    #: Filters only.
    ANY = 1
    DENY = 2
    ALLOW = 3


_Op = AclOperation
#: The operations each resource type has (Kafka's AclEntry.supportedOperations): what kafka-acls
#: accepts for it, and what a response's "authorized operations" bit field may hold.
OPERATIONS_OF: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
    ),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER}
        | {_Op.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
}


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """What an ACL is about: a resource type and a name, literally or as a prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        # Kafka's audit-log form: Topic:LITERAL:orders.
        return f"{self.resource_type.kafka_name}:{self.pattern_type.name}:{self.name}"

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern applies to the resource ``resource_type`` named ``name``."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name in (name, WILDCARD_RESOURCE)
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return False


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (``User:alice``), from where (an IP address, or ``*``), may or may not do what."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"{self.principal} has {self.permission_type.kafka_name} permission for operations: "
            f"{self.operation.kafka_name} from hosts: {self.host}"
        )


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def from_wire(
        cls, *, resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
        permission: int,
    ) -> AclBinding:  # fmt: skip
        """A binding from the codes and strings a request or response carries (unknown codes
        become UNKNOWN: :func:`binding_error` says so)."""
        return cls(
            ResourcePattern(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)),
            AccessControlEntry(
                principal, host, AclOperation.from_code(operation), AclPermissionType.from_code(permission)
            ),
        )


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Which resource patterns a DescribeAcls or DeleteAcls filter selects."""

    resource_type: ResourceType = ResourceType.ANY
    #: None: any name.
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        # Kafka's ResourcePatternFilter.matches.
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that would apply to a resource named like the filter.
        return pattern.matches_resource(pattern.resource_type, self.name)

    @property
    def matches_at_most_one(self) -> bool:
        """Whether the filter names one pattern exactly (so that it can be looked up, not searched)."""
        return (
            self.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
            and self.name is not None
            and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    #: None: any principal, any host.
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        # Kafka's AccessControlEntryFilter.matches: plain equality, no implications.
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    @classmethod
    def from_wire(
        cls,
        *,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        """A filter from the codes and strings DescribeAcls and DeleteAcls carry (unknown codes
        become UNKNOWN: :func:`filter_error` says so)."""
        return cls(
            ResourcePatternFilter(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)),
            AccessControlEntryFilter(
                principal, host, AclOperation.from_code(operation), AclPermissionType.from_code(permission)
            ),
        )


#: Matches every binding.
ANY_BINDING = AclBindingFilter()


def _principal_error(principal: str) -> str | None:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        return f"principal {principal!r} is not of the form TYPE:NAME (e.g. User:alice)"
    return None


def binding_error(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be stored, or None: every element must be specific (no UNKNOWN,
    ANY or MATCH), the principal ``TYPE:NAME``, the name non-empty and free of ``/`` (it becomes
    a ZooKeeper node), and the Cluster resource is named ``kafka-cluster``."""
    pattern, entry = binding.pattern, binding.entry
    problems = (
        (pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY),
         f"resource type {pattern.resource_type.name} is not a resource"),
        (pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED),
         f"pattern type {pattern.pattern_type.name} is for filters; an ACL is LITERAL or PREFIXED"),
        (entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY),
         f"operation {entry.operation.name} is for filters; an ACL names an operation"),
        (entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY),
         f"permission type {entry.permission_type.name} is for filters; an ACL is ALLOW or DENY"),
        (not pattern.name, "the resource name is empty"),
        ("/" in pattern.name, f"resource name {pattern.name!r} contains '/'"),
        (pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME,
         f"the only name of the Cluster resource is {CLUSTER_NAME!r}, not {pattern.name!r}"),
        (not entry.host, "the host is empty (use * for every host)"),
    )  # fmt: skip
    for found, message in problems:
        if found:
            return message
    return _principal_error(entry.principal)


def filter_error(binding_filter: AclBindingFilter) -> str | None:
    """Why ``binding_filter`` cannot be matched, or None: no element may be UNKNOWN (a code this
    side does not know, which Kafka refuses rather than guessing)."""
    pattern, entry = binding_filter.pattern, binding_filter.entry
    for element in (pattern.resource_type, pattern.pattern_type, entry.operation, entry.permission_type):
        if element.name == "UNKNOWN":
            return f"the filter has an unknown {type(element).__name__} (code {int(element)})"
    return None
