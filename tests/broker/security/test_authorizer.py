"""The authorization decision, sans-IO: Kafka's own AclAuthorizerTest and BaseAuthorizerTest cases
where they apply (ported, not copied: the same ACLs, principals, hosts and expectations), then
properties against a reference model that scans every binding the obvious way."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.broker.security.authorizer import AclIndex, Reason, authorize, authorize_any
from tributary.broker.security.principal import KafkaPrincipal
from tributary.protocol.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
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

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE, DESCRIBE, ALTER = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALTER
ALL = AclOperation.ALL
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALICE = KafkaPrincipal("User", "alice")
SUPER_USERS = frozenset({KafkaPrincipal("User", "superuser1"), KafkaPrincipal("User", "superuser2")})
#: Every operation a resource can be asked for (not the filter-only and token ones).
OPERATIONS = [
    op
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY, AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS)
]
RESOURCE = ResourcePattern(TOPIC, "foo-6a9d", LITERAL)


class Acls:
    """ACLs being added and removed, as Kafka's tests do it with addAcls/removeAcls."""

    def __init__(self) -> None:
        self.index = AclIndex()

    def add(self, pattern: ResourcePattern, *entries: AccessControlEntry) -> None:
        self.index = self.index.with_resource(pattern, self.index.entries(pattern) | set(entries))

    def remove(self, pattern: ResourcePattern, *entries: AccessControlEntry) -> None:
        self.index = self.index.with_resource(pattern, self.index.entries(pattern) - set(entries))

    def allows(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource: ResourcePattern = RESOURCE,
        *,
        everyone: bool = False,
    ) -> bool:
        decision = authorize(
            principal, host, operation, resource.resource_type, resource.name, acls=self.index,
            super_users=SUPER_USERS, allow_everyone_if_no_acl_found=everyone,
        )  # fmt: skip
        return decision.allowed

    def allows_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation, kind: ResourceType) -> bool:
        return authorize_any(principal, host, operation, kind, self.index, super_users=SUPER_USERS)


def ace(
    principal: KafkaPrincipal | str, host: str, operation: AclOperation, permission: AclPermissionType
) -> AccessControlEntry:
    return AccessControlEntry(str(principal), host, operation, permission)


ALLOW_READ = ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, READ, ALLOW)
ALLOW_WRITE = ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, WRITE, ALLOW)
DENY_READ = ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, READ, DENY)
WILDCARD_TOPIC = ResourcePattern(TOPIC, WILDCARD_RESOURCE, LITERAL)
PREFIXED_FOO = ResourcePattern(TOPIC, "foo", PREFIXED)
CLUSTER_RESOURCE = ResourcePattern(CLUSTER, CLUSTER_NAME, LITERAL)

# --- AclAuthorizerTest ---------------------------------------------------------------------------


def test_empty_resource_name() -> None:
    acls = Acls()
    group = ResourcePattern(GROUP, "", LITERAL)
    assert not acls.allows(ALICE, "192.168.0.1", READ, group)
    acls.add(ResourcePattern(GROUP, WILDCARD_RESOURCE, LITERAL), ALLOW_READ)
    assert acls.allows(ALICE, "192.168.0.1", READ, group)


def test_topic_acl() -> None:
    user1, user2, user3 = ALICE, KafkaPrincipal("User", "rob"), KafkaPrincipal("User", "batman")
    host1, host2 = "192.168.1.1", "192.168.1.2"
    acls = Acls()
    acls.add(
        RESOURCE,
        ace(user1, host1, READ, ALLOW),
        ace(user1, host2, READ, ALLOW),
        ace(user1, host1, READ, DENY),
        ace(user1, host1, WRITE, ALLOW),
        ace(user1, WILDCARD_HOST, DESCRIBE, ALLOW),
        ace(user2, WILDCARD_HOST, READ, ALLOW),
        ace(user3, WILDCARD_HOST, WRITE, ALLOW),
    )
    assert acls.allows(user1, host2, READ)
    assert not acls.allows(user1, host1, READ), "the deny from host1 wins"
    assert acls.allows(user1, host1, WRITE)
    assert not acls.allows(user1, host2, WRITE), "Write is allowed from host1 only"
    assert acls.allows(user1, host1, DESCRIBE)
    assert acls.allows(user1, host2, DESCRIBE)
    assert not acls.allows(user1, host1, ALTER)
    assert not acls.allows(user1, host2, ALTER)
    # Read and Write imply Describe.
    assert acls.allows(user2, host1, DESCRIBE)
    assert acls.allows(user3, host1, DESCRIBE)
    assert acls.allows(user2, host1, READ)
    assert acls.allows(user3, host1, WRITE)


def test_deny_takes_precedence() -> None:
    acls = Acls()
    host = "192.168.2.1"
    acls.add(RESOURCE, ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, ALL, ALLOW), ace(ALICE, host, ALL, DENY))
    assert not acls.allows(ALICE, host, READ)


def test_allow_all_access() -> None:
    acls = Acls()
    acls.add(RESOURCE, ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, ALL, ALLOW))
    assert acls.allows(KafkaPrincipal("User", "random"), "192.0.4.4", READ)


def test_super_user_has_access_whatever_the_acls() -> None:
    acls = Acls()
    acls.add(RESOURCE, ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, ALL, DENY))
    assert acls.allows(KafkaPrincipal("User", "superuser1"), "192.0.4.4", READ)
    assert acls.allows(KafkaPrincipal("User", "superuser2"), "192.0.4.4", READ)
    assert not acls.allows(ALICE, "192.0.4.4", READ)


def test_wildcard_acls() -> None:
    acls = Acls()
    host1 = "192.168.3.1"
    assert not acls.allows(ALICE, host1, READ), "no ACL: closed"
    acls.add(WILDCARD_TOPIC, ace(ALICE, host1, READ, ALLOW))
    assert acls.allows(ALICE, host1, READ)
    acls.add(RESOURCE, ace(ALICE, host1, WRITE, ALLOW))
    acls.add(WILDCARD_TOPIC, ace(ALICE, host1, WRITE, DENY))
    assert not acls.allows(ALICE, host1, WRITE), "a deny on the wildcard covers the topic"


def test_no_acl_found_denies_unless_everyone_is_allowed() -> None:
    acls = Acls()
    assert not acls.allows(ALICE, "192.168.0.1", READ)
    assert acls.allows(ALICE, "192.168.0.1", READ, everyone=True)
    # Any ACL on the resource, even for someone else, ends "no ACL found".
    acls.add(RESOURCE, ace("User:bob", WILDCARD_HOST, READ, ALLOW))
    assert not acls.allows(ALICE, "192.168.0.1", READ, everyone=True)


@pytest.mark.parametrize(
    ("parent", "implied"),
    [
        (ALL, set(OPERATIONS)),
        (READ, {DESCRIBE}),
        (WRITE, {DESCRIBE}),
        (AclOperation.DELETE, {DESCRIBE}),
        (ALTER, {DESCRIBE}),
        (DESCRIBE, set()),
        (AclOperation.ALTER_CONFIGS, {AclOperation.DESCRIBE_CONFIGS}),
        (AclOperation.DESCRIBE_CONFIGS, set()),
    ],
)
def test_implications_of_allow(parent: AclOperation, implied: set[AclOperation]) -> None:
    acls = Acls()
    acls.add(CLUSTER_RESOURCE, ace(ALICE, WILDCARD_HOST, parent, ALLOW))
    for op in OPERATIONS:
        assert acls.allows(ALICE, "192.168.3.1", op, CLUSTER_RESOURCE) == (op == parent or op in implied), op


@pytest.mark.parametrize(
    ("parent", "denied"), [(ALL, set(OPERATIONS)), (DESCRIBE, set()), (AclOperation.DESCRIBE_CONFIGS, set())]
)
def test_implications_of_deny(parent: AclOperation, denied: set[AclOperation]) -> None:
    acls = Acls()
    acls.add(CLUSTER_RESOURCE, ace(ALICE, WILDCARD_HOST, parent, DENY), ace(ALICE, WILDCARD_HOST, ALL, ALLOW))
    for op in OPERATIONS:
        assert acls.allows(ALICE, "192.168.3.1", op, CLUSTER_RESOURCE) == (op != parent and op not in denied), op


def test_access_allowed_by_the_wildcard_or_a_prefix() -> None:
    for pattern in (WILDCARD_TOPIC, PREFIXED_FOO):
        acls = Acls()
        acls.add(pattern, ALLOW_READ)
        assert acls.allows(ALICE, "192.168.0.1", READ)


def test_authorize_with_a_prefixed_resource_among_many() -> None:
    acls = Acls()
    for name, kind in [
        ("a_other", LITERAL), ("a_other", PREFIXED), ("foo-1d3c", PREFIXED), ("foo-9e2a", PREFIXED),
        ("foo-77ab-zzz", PREFIXED), ("fooo-5c2f", PREFIXED), ("fo-0b1d", PREFIXED), ("fop-8a4e", PREFIXED),
        ("fon-3f6c", PREFIXED), ("fon-", PREFIXED), ("z_other", PREFIXED), ("z_other", LITERAL),
    ]:  # fmt: skip
        acls.add(ResourcePattern(TOPIC, name, kind), DENY_READ)
    acls.add(PREFIXED_FOO, ALLOW_READ)
    assert acls.allows(ALICE, "192.168.0.1", READ)


def test_single_character_resource_acls() -> None:
    acls = Acls()
    acls.add(ResourcePattern(TOPIC, "f", LITERAL), ALLOW_READ)
    assert acls.allows(ALICE, "192.168.0.1", READ, ResourcePattern(TOPIC, "f"))
    assert not acls.allows(ALICE, "192.168.0.1", READ, ResourcePattern(TOPIC, "foo"))
    acls.add(ResourcePattern(TOPIC, "_", PREFIXED), ALLOW_READ)
    assert acls.allows(ALICE, "192.168.0.1", READ, ResourcePattern(TOPIC, "_foo"))
    assert acls.allows(ALICE, "192.168.0.1", READ, ResourcePattern(TOPIC, "_"))
    assert not acls.allows(ALICE, "192.168.0.1", READ, ResourcePattern(TOPIC, "foo_"))


def test_acls_by_principal_filter() -> None:
    acls = Acls()
    acls.add(RESOURCE, ace(ALICE, WILDCARD_HOST, WRITE, ALLOW))
    by = lambda who: list(acls.index.bindings(AclBindingFilter(entry=AccessControlEntryFilter(principal=who))))  # noqa: E731
    assert by(WILDCARD_PRINCIPAL) == [], "an ACL for alice is not one for User:*"
    assert len(by(str(ALICE))) == 1
    acls.remove(RESOURCE, ace(ALICE, WILDCARD_HOST, WRITE, ALLOW))
    acls.add(RESOURCE, ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, WRITE, ALLOW))
    assert len(by(WILDCARD_PRINCIPAL)) == 1
    assert by(str(ALICE)) == []


def test_acls_filter() -> None:
    resource1 = ResourcePattern(TOPIC, "foo-35c1", LITERAL)
    resource2 = ResourcePattern(TOPIC, "bar-9f1e", LITERAL)
    prefixed = ResourcePattern(TOPIC, "bar-", PREFIXED)
    acl1 = AclBinding(resource1, ace(ALICE, WILDCARD_HOST, READ, ALLOW))
    acl2 = AclBinding(resource1, ace(ALICE, "192.168.0.1", WRITE, ALLOW))
    acl3 = AclBinding(resource2, ace(ALICE, WILDCARD_HOST, DESCRIBE, ALLOW))
    acl4 = AclBinding(prefixed, ace(WILDCARD_PRINCIPAL, WILDCARD_HOST, READ, ALLOW))
    index = AclIndex.of([acl1, acl2, acl3, acl4])
    assert set(index.bindings()) == {acl1, acl2, acl3, acl4}
    exactly = lambda p: AclBindingFilter(ResourcePatternFilter(p.resource_type, p.name, p.pattern_type))  # noqa: E731
    assert set(index.bindings(exactly(resource1))) == {acl1, acl2}
    assert set(index.bindings(exactly(prefixed))) == {acl4}
    matching = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, resource2.name, PatternType.MATCH))
    assert set(index.bindings(matching)) == {acl3, acl4}
    any_baz = AclBindingFilter(ResourcePatternFilter(TOPIC, "baz", PatternType.ANY))
    assert set(index.bindings(any_baz)) == set()


# --- BaseAuthorizerTest: authorizeByResourceType ------------------------------------------------------

USER1, USER2 = KafkaPrincipal("User", "user1"), KafkaPrincipal("User", "user2")
HOST1, HOST2 = "192.168.1.1", "192.168.1.2"


def test_by_resource_type_multiple_add_and_remove() -> None:
    acls = Acls()
    resource1 = ResourcePattern(TOPIC, "sb1-4c2e", LITERAL)
    deny_read, allow_read = ace(USER1, HOST1, READ, DENY), ace(USER1, HOST1, READ, ALLOW)
    for _ in range(3):
        assert not acls.allows_any(USER1, HOST1, READ, TOPIC)
        acls.add(resource1, allow_read)
        assert acls.allows_any(USER1, HOST1, READ, TOPIC)
        acls.add(resource1, deny_read)
        assert not acls.allows_any(USER1, HOST1, READ, TOPIC)
        acls.remove(resource1, deny_read)
        assert acls.allows_any(USER1, HOST1, READ, TOPIC)
        acls.remove(resource1, allow_read)


def test_by_resource_type_unrelated_deny_does_not_dominate_allow() -> None:
    acls = Acls()
    resource1, resource2 = ResourcePattern(TOPIC, "sb1-1", LITERAL), ResourcePattern(TOPIC, "sb2-2", LITERAL)
    acls.add(
        resource1,
        ace(USER1, HOST1, READ, DENY), ace(USER2, HOST1, READ, DENY), ace(USER1, HOST2, WRITE, DENY),
        ace(USER2, HOST2, READ, DENY), ace(USER1, HOST2, READ, ALLOW),
    )  # fmt: skip
    acls.add(resource2, ace(USER1, HOST2, READ, DENY))
    acls.add(ResourcePattern(GROUP, "s", PREFIXED), ace(USER1, HOST2, READ, DENY))
    assert not acls.allows_any(USER1, HOST1, READ, TOPIC)
    assert not acls.allows_any(USER1, HOST1, READ, GROUP)
    assert not acls.allows_any(USER1, HOST1, READ, ResourceType.TRANSACTIONAL_ID)
    assert not acls.allows_any(USER1, HOST1, READ, CLUSTER)
    assert acls.allows_any(USER1, HOST2, READ, TOPIC)


def test_by_resource_type_prefixed_deny_dominates() -> None:
    acls = Acls()
    allow, deny = ace(USER1, HOST1, READ, ALLOW), ace(USER1, HOST1, READ, DENY)
    group = lambda name: ResourcePattern(GROUP, name, PREFIXED)  # noqa: E731
    acls.add(group("abcde"), allow)
    assert acls.allows_any(USER1, HOST1, READ, GROUP)
    acls.add(group("abcd"), deny)
    assert not acls.allows_any(USER1, HOST1, READ, GROUP)
    acls.add(group("abc"), allow)
    assert acls.allows_any(USER1, HOST1, READ, GROUP)
    acls.add(group("a"), deny)
    assert not acls.allows_any(USER1, HOST1, READ, GROUP)
    acls.add(group("ab"), allow)
    assert not acls.allows_any(USER1, HOST1, READ, GROUP)


def test_by_resource_type_wildcard_deny_dominates() -> None:
    acls = Acls()
    allow, deny = ace(USER1, HOST1, WRITE, ALLOW), ace(USER1, HOST1, WRITE, DENY)
    acls.add(ResourcePattern(GROUP, "hello", PREFIXED), allow)
    assert acls.allows_any(USER1, HOST1, WRITE, GROUP)
    acls.add(ResourcePattern(GROUP, WILDCARD_RESOURCE, LITERAL), deny)
    assert not acls.allows_any(USER1, HOST1, WRITE, GROUP)
    acls.add(ResourcePattern(GROUP, WILDCARD_RESOURCE, LITERAL), allow)
    acls.add(ResourcePattern(GROUP, "aloha", LITERAL), allow)
    assert not acls.allows_any(USER1, HOST1, WRITE, GROUP)


def test_by_resource_type_with_all_operation_and_hosts() -> None:
    acls = Acls()
    resource1 = ResourcePattern(TOPIC, "sb1-7", LITERAL)
    acls.add(resource1, ace(USER1, HOST1, WRITE, DENY), ace(USER1, HOST1, ALL, ALLOW))
    assert acls.allows_any(USER1, HOST1, READ, TOPIC)
    acls.add(resource1, ace(USER1, HOST1, ALL, DENY))
    assert not acls.allows_any(USER1, HOST1, READ, TOPIC)
    assert not acls.allows_any(USER1, HOST2, READ, TOPIC)
    resource2 = ResourcePattern(TOPIC, "sb2-7", LITERAL)
    acls.add(resource2, ace(USER1, WILDCARD_HOST, READ, ALLOW))
    assert acls.allows_any(USER1, HOST2, READ, TOPIC)
    acls.add(resource2, ace(USER1, WILDCARD_HOST, READ, DENY))
    assert not acls.allows_any(USER1, HOST2, READ, TOPIC)


def test_decisions_say_why() -> None:
    acls = Acls()
    decide = lambda who: authorize(  # noqa: E731
        who, HOST1, READ, TOPIC, RESOURCE.name, acls=acls.index, super_users=SUPER_USERS
    )
    assert decide(ALICE).reason == Reason.NO_ACL
    acls.add(RESOURCE, ace(USER2, WILDCARD_HOST, READ, ALLOW), ace(USER1, WILDCARD_HOST, READ, DENY))
    assert decide(ALICE).reason == Reason.NO_MATCHING_ALLOW
    assert decide(USER1).reason == Reason.DENIED_BY_ACL
    assert decide(USER2).reason == Reason.ALLOWED_BY_ACL
    assert decide(KafkaPrincipal("User", "superuser1")).reason == Reason.SUPER_USER


# --- properties against a reference model ---------------------------------------------------------

PRINCIPALS = ["User:alice", "User:bob", WILDCARD_PRINCIPAL]
HOSTS = ["10.0.0.1", "10.0.0.2", WILDCARD_HOST]
NAMES = ["a", "ab", "abc", "b", "ba", WILDCARD_RESOURCE]
KINDS = [TOPIC, GROUP]
STORED_OPERATIONS = [op for op in OPERATIONS]

patterns = st.builds(
    ResourcePattern, st.sampled_from(KINDS), st.sampled_from(NAMES), st.sampled_from([LITERAL, PREFIXED])
)
entries = st.builds(
    AccessControlEntry,
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    st.sampled_from(STORED_OPERATIONS),
    st.sampled_from([ALLOW, DENY]),
)
bindings = st.lists(st.builds(AclBinding, patterns, entries), max_size=12)


class Asked(NamedTuple):
    principal: KafkaPrincipal
    host: str
    op: AclOperation
    kind: ResourceType
    name: str


requests = st.builds(
    Asked,
    st.sampled_from(["alice", "bob", "carol", "root"]).map(lambda n: KafkaPrincipal("User", n)),
    st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
    st.sampled_from(OPERATIONS),
    st.sampled_from(KINDS),
    st.sampled_from(["a", "ab", "abc", "abd", "b", "bab", "c", ""]),
)
ROOT = frozenset({KafkaPrincipal("User", "root")})

#: The implications spelled out once more, as Kafka's AclOperation javadoc lists them.
GRANTS = {
    DESCRIBE: {DESCRIBE, READ, WRITE, AclOperation.DELETE, ALTER, ALL},
    AclOperation.DESCRIBE_CONFIGS: {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, ALL},
}


def reference(asked: Asked, acls: list[AclBinding], everyone: bool) -> bool:
    """Scan every binding: the plainest reading of Kafka's rules."""
    principal, host, op, kind, name = asked
    if principal in ROOT:
        return True
    applicable = [b.entry for b in acls if b.pattern.matches_resource(kind, name)]
    if not applicable:
        return everyone

    def matches(e: AccessControlEntry, ops: set[AclOperation]) -> bool:
        return e.principal in (str(principal), "User:*") and e.host in (host, "*") and e.operation in ops

    if any(e.permission_type == DENY and matches(e, {op, ALL}) for e in applicable):
        return False
    return any(e.permission_type == ALLOW and matches(e, GRANTS.get(op, {op, ALL})) for e in applicable)


def decide(asked: Asked, index: AclIndex, everyone: bool) -> bool:
    decision = authorize(
        asked.principal, asked.host, asked.op, asked.kind, asked.name,
        acls=index, super_users=ROOT, allow_everyone_if_no_acl_found=everyone,
    )  # fmt: skip
    return decision.allowed


@settings(max_examples=400, deadline=None)
@given(bindings, st.lists(requests, min_size=1, max_size=8), st.booleans())
def test_the_indexed_decision_is_the_reference_models(
    acls: list[AclBinding], asked: list[Asked], everyone: bool
) -> None:
    index = AclIndex.of(acls)
    for request in asked:
        assert decide(request, index, everyone) == reference(request, acls, everyone), request


@settings(max_examples=200, deadline=None)
@given(bindings, entries, patterns, requests)
def test_a_deny_never_grants_and_an_allow_never_revokes(
    acls: list[AclBinding],
    entry: AccessControlEntry,
    pattern: ResourcePattern,
    request: Asked,
) -> None:
    before = decide(request, AclIndex.of(acls), False)
    after = decide(request, AclIndex.of([*acls, AclBinding(pattern, entry)]), False)
    if entry.permission_type == DENY:
        assert after <= before
    else:
        assert after >= before


@settings(max_examples=200, deadline=None)
@given(bindings, requests)
def test_a_matching_deny_all_always_wins_except_for_super_users(acls: list[AclBinding], request: Asked) -> None:
    principal, host, kind = request.principal, request.host, request.kind
    deny_all = AclBinding(ResourcePattern(kind, WILDCARD_RESOURCE), ace(principal, host, ALL, DENY))
    index = AclIndex.of([*acls, deny_all])
    assert decide(request, index, True) == (principal in ROOT)


@settings(max_examples=200, deadline=None)
@given(bindings, requests)
def test_authorize_any_agrees_with_some_resource_being_allowed(acls: list[AclBinding], request: Asked) -> None:
    """Kafka's authorizeByResourceType is an approximation; where a literal or prefixed resource
    is plainly allowed by the reference model (by the operation itself or All, which is all it
    looks at), it must say yes, and a deny of All on the wildcard must make it say no."""
    principal, host, op, kind, _ = request
    index = AclIndex.of(acls)
    if principal in ROOT:
        assert authorize_any(principal, host, op, kind, index, super_users=ROOT)
        return
    direct = [
        b for b in acls
        if b.pattern.resource_type == kind and b.entry.permission_type == ALLOW and b.entry.operation in (op, ALL)
        and b.entry.principal in (str(principal), "User:*") and b.entry.host in (host, "*")
    ]  # fmt: skip
    wildcard_denied = any(
        b.pattern == ResourcePattern(kind, WILDCARD_RESOURCE)
        and b.entry.permission_type == DENY
        and b.entry.operation in (op, ALL)
        and b.entry.principal in (str(principal), "User:*")
        and b.entry.host in (host, "*")
        for b in acls
    )
    answer = authorize_any(principal, host, op, kind, index, super_users=ROOT)
    if wildcard_denied or not direct:
        assert not answer
    elif any(reference(request._replace(name=b.pattern.name), acls, False) for b in direct if b.pattern.name != "*"):
        # A resource named like an allowed pattern is allowed: some resource is.
        assert answer
