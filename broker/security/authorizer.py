"""The authorization decision: may this principal, from this host, do this to this resource?

A pure function of its inputs, as Kafka's ``AclAuthorizer.authorizeAction`` decides it:

1. A super user (``super.users``) may do anything.
2. The ACLs that apply to the resource are those on its literal name, on the literal wildcard
   ``*`` of its type, and on every PREFIXED pattern its name starts with.
3. None at all (for anyone, for any operation): allowed only with
   ``allow.everyone.if.no.acl.found``.
4. A DENY entry that matches wins: its principal is the caller's or ``User:*``, its host the
   caller's or ``*``, its operation the one asked for or ``All``. Denying one operation denies
   nothing else (a Deny on Read leaves Describe to the allows).
5. Otherwise an ALLOW entry that matches the same way grants it, where allowing Read, Write,
   Delete or Alter also allows Describe, allowing AlterConfigs also allows DescribeConfigs, and
   allowing All allows everything.

:class:`AclIndex` is the ACLs as the broker caches them: immutable (a change makes a new one,
which request handlers then read without locking), indexed so that a decision looks up the few
patterns that can apply rather than scanning them all.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from tributary.broker.security.principal import KafkaPrincipal
from tributary.protocol.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

#: The operations whose ALLOW also allows the key (besides itself and All): Kafka's implications.
_IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}
#: Worked out once: the decision runs for every topic of every produce and fetch.
_GRANTING = {op: frozenset({op, AclOperation.ALL}) | _IMPLIED_BY.get(op, frozenset()) for op in AclOperation}
_DENYING = {op: frozenset({op, AclOperation.ALL}) for op in AclOperation}


def granting_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations an ALLOW entry may name to grant ``operation``."""
    return _GRANTING[operation]


def denying_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations a DENY entry may name to refuse ``operation``: no implications."""
    return _DENYING[operation]


class Reason(Enum):
    SUPER_USER = "super user"
    ALLOWED_BY_ACL = "allowed by an ACL"
    NO_ACL_EVERYONE_ALLOWED = "no ACL on the resource, allow.everyone.if.no.acl.found"
    NO_ACL = "no ACL on the resource"
    DENIED_BY_ACL = "denied by an ACL"
    NO_MATCHING_ALLOW = "no ACL allows it"


_ALLOWING = frozenset({Reason.SUPER_USER, Reason.ALLOWED_BY_ACL, Reason.NO_ACL_EVERYONE_ALLOWED})


@dataclass(frozen=True, slots=True)
class Decision:
    reason: Reason

    @property
    def allowed(self) -> bool:
        return self.reason in _ALLOWING

    def __bool__(self) -> bool:
        return self.allowed


class AclIndex:
    """Every ACL, by resource pattern, immutable. Decisions look entries up by plain names: per
    resource type, a map of LITERAL names and one of PREFIXED names, plus the lengths of the
    PREFIXED names, so that finding the prefixes of a name costs one lookup per distinct length
    rather than one per character (or a scan)."""

    __slots__ = ("_acls", "_literal", "_prefix_lengths", "_prefixed")

    def __init__(self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]] | None = None) -> None:
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {
            pattern: entries for pattern, entries in (acls or {}).items() if entries
        }
        # Keyed by the type's plain int: an IntEnum hashes in Python, an int in C.
        self._literal: dict[int, dict[str, frozenset[AccessControlEntry]]] = {}
        self._prefixed: dict[int, dict[str, frozenset[AccessControlEntry]]] = {}
        for pattern, entries in self._acls.items():
            by_name = self._literal if pattern.pattern_type == PatternType.LITERAL else self._prefixed
            by_name.setdefault(int(pattern.resource_type), {})[pattern.name] = entries
        self._prefix_lengths = {
            kind: tuple(sorted({len(name) for name in names})) for kind, names in self._prefixed.items()
        }

    @classmethod
    def of(cls, bindings: Iterable[AclBinding]) -> AclIndex:
        grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            grouped.setdefault(binding.pattern, set()).add(binding.entry)
        return cls({pattern: frozenset(entries) for pattern, entries in grouped.items()})

    def with_resource(self, pattern: ResourcePattern, entries: Collection[AccessControlEntry]) -> AclIndex:
        """A new index where ``pattern`` has exactly ``entries`` (none: the pattern is gone)."""
        acls = dict(self._acls)
        if entries:
            acls[pattern] = frozenset(entries)
        else:
            acls.pop(pattern, None)
        return AclIndex(acls)

    def __len__(self) -> int:
        """The number of ACLs (entries), as Kafka's acls-total-count."""
        return sum(len(entries) for entries in self._acls.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AclIndex) and self._acls == other._acls

    def __hash__(self) -> int:
        return hash(frozenset(self._acls.items()))

    def __repr__(self) -> str:
        return f"AclIndex({len(self._acls)} patterns, {len(self)} ACLs)"

    @property
    def patterns(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        return self._acls

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def bindings(self, binding_filter: AclBindingFilter | None = None) -> Iterator[AclBinding]:
        """Every binding (that ``binding_filter`` matches), in pattern order."""
        for pattern in sorted(self._acls):
            if binding_filter is not None and not binding_filter.pattern.matches(pattern):
                continue
            for entry in sorted(self._acls[pattern]):
                if binding_filter is None or binding_filter.entry.matches(entry):
                    yield AclBinding(pattern, entry)

    def applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of every pattern that applies to the resource: its literal name, the
        literal wildcard, and each PREFIXED pattern the name starts with."""
        found: list[AccessControlEntry] = []
        kind = int(resource_type)
        literal = self._literal.get(kind)
        if literal:
            found += literal.get(WILDCARD_RESOURCE, ())
            if name != WILDCARD_RESOURCE:
                found += literal.get(name, ())
        prefixed = self._prefixed.get(kind)
        if prefixed:
            for length in self._prefix_lengths[kind]:
                if length > len(name):
                    break
                found += prefixed.get(name[:length], ())
        return found


# One of each, made once.
_SUPER_USER = Decision(Reason.SUPER_USER)
_ALLOWED = Decision(Reason.ALLOWED_BY_ACL)
_EVERYONE = Decision(Reason.NO_ACL_EVERYONE_ALLOWED)
_NO_ACL = Decision(Reason.NO_ACL)
_DENIED = Decision(Reason.DENIED_BY_ACL)
_NO_ALLOW = Decision(Reason.NO_MATCHING_ALLOW)


def _matches(entry: AccessControlEntry, principal: str, host: str, operations: frozenset[AclOperation]) -> bool:
    return (
        entry.principal in (principal, WILDCARD_PRINCIPAL)
        and entry.host in (host, WILDCARD_HOST)
        and entry.operation in operations
    )


def authorize(
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    acls: AclIndex,
    super_users: Collection[KafkaPrincipal] = (),
    allow_everyone_if_no_acl_found: bool = False,
) -> Decision:
    """Whether ``principal`` connected from ``host`` (an IP address) may perform ``operation`` on
    the resource ``resource_type`` named ``name``; see the module's docstring for the rules."""
    if principal in super_users:
        return _SUPER_USER
    applicable = acls.applicable(resource_type, name)
    if not applicable:
        return _EVERYONE if allow_everyone_if_no_acl_found else _NO_ACL
    who = str(principal)
    denying = _DENYING[operation]
    if any(e.permission_type == AclPermissionType.DENY and _matches(e, who, host, denying) for e in applicable):
        return _DENIED
    granting = _GRANTING[operation]
    if any(e.permission_type == AclPermissionType.ALLOW and _matches(e, who, host, granting) for e in applicable):
        return _ALLOWED
    return _NO_ALLOW


def authorize_any(
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    acls: AclIndex,
    *,
    super_users: Collection[KafkaPrincipal] = (),
    allow_everyone_if_no_acl_found: bool = False,
) -> bool:
    """Whether ``principal`` may perform ``operation`` on *some* resource of the type (Kafka's
    ``authorizeByResourceType``; an idempotent producer needs Write on some topic): some ALLOW
    of the operation (or All; no implications, as in Kafka) on a pattern that no DENY covers. A
    DENY on the literal wildcard covers every name; a PREFIXED DENY covers the literal names and
    the longer prefixes that start with it."""
    if principal in super_users:
        return True
    who = str(principal)
    operations = _DENYING[operation]
    allows: list[ResourcePattern] = []
    deny_literals: set[str] = set()
    deny_prefixes: set[str] = set()
    for pattern, entries in acls.patterns.items():
        if pattern.resource_type != resource_type:
            continue
        for entry in entries:
            if not _matches(entry, who, host, operations):
                continue
            if entry.permission_type == AclPermissionType.DENY:
                (deny_literals if pattern.pattern_type == PatternType.LITERAL else deny_prefixes).add(pattern.name)
            else:
                allows.append(pattern)
    if WILDCARD_RESOURCE in deny_literals:
        return False
    if allow_everyone_if_no_acl_found:
        return True

    def dominated(name: str) -> bool:
        return any(name.startswith(prefix) for prefix in deny_prefixes)

    for pattern in allows:
        if pattern.pattern_type == PatternType.PREFIXED and not dominated(pattern.name):
            return True
        if pattern.pattern_type == PatternType.LITERAL and (
            pattern.name == WILDCARD_RESOURCE or (pattern.name not in deny_literals and not dominated(pattern.name))
        ):
            return True
    return False
