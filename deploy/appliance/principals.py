"""Who logs in to each cluster and what each may do: SCRAM users, super users and ACLs.

A pure function of the topology (``cluster_security``), so that `tributary up` (which writes
them into ZooKeeper itself) and the Ansible inventory (whose broker role runs `tributary users
--zookeeper` and `tributary acls --zookeeper` with them) give every cluster the same ones.

Users (SCRAM credentials in the cluster's ZooKeeper), only where a link logs in:

- ``broker-<cluster>``: the brokers' own, when they replicate over a SASL listener; super user;
- ``admin``: the operator's (`tributary acls`, `topics`, `status` on a SASL listener); super user;
- ``mirror-<alias>``: on the mirror's source, and on its target when that side logs in;
- ``loader-<load>``: on the load's cluster, when its link logs in.

ACLs (with ``[security] authorizer = true``, the default), each only what the component needs:

- a mirror on its source: Read, Describe and DescribeConfigs on every topic (``*``: its
  ``topics`` and ``exclude`` are regular expressions, which an ACL cannot be; DescribeConfigs
  lets it copy the topics' settings) and Read on its group;
- a mirror on its target: Read, Write, Create, Describe and Alter on the topics prefixed
  ``<alias>.`` (Create and Alter: it creates them and adds partitions; Read: its checkpoints are
  offset commits, which Kafka checks against the topics), the same but Alter on its offsets
  topic, and Read on its group (where it commits its checkpoints);
- a load: Read and Describe on the ``<alias>.`` prefix of every mirror into its cluster (every
  topic, ``*``, on a cluster no mirror feeds). It uses no consumer group: its offsets are
  committed with the data, in the warehouse.

A listener that does not authenticate (PLAINTEXT, SSL without client certificates) trusts
whoever reaches it: its connections are ``User:ANONYMOUS``, which is made a super user on a
cluster that has one, so that applications and replication on a local PLAINTEXT listener work as
they did before (as Kafka operators do). The ACLs then restrict the users that log in: the
mirrors reading across datacenters, and every component on a cluster whose listeners all
authenticate.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.deploy.appliance.links import Link, links
from tributary.deploy.appliance.topology import Cluster, Topology
from tributary.mirror.config import DEFAULT_OFFSETS_TOPIC
from tributary.protocol.acl import (
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

ADMIN_USER = "admin"
ANONYMOUS = "User:ANONYMOUS"
Op = AclOperation


def broker_user(cluster: Cluster) -> str:
    return f"broker-{cluster.name}"


def credential_mechanism(sasl_mechanism: str) -> str:
    """The SCRAM credential a user needs for the mechanism (PLAIN is checked against SHA-512)."""
    return "SCRAM-SHA-256" if sasl_mechanism == "SCRAM-SHA-256" else "SCRAM-SHA-512"


@dataclass(frozen=True)
class Grant:
    """ALLOW ``operations`` on one resource pattern to one user: one ``tributary acls add``."""

    user: str
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    operations: tuple[AclOperation, ...]

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    def bindings(self) -> list[AclBinding]:
        pattern = ResourcePattern(self.resource_type, self.name, self.pattern_type)
        return [
            AclBinding(pattern, AccessControlEntry(self.principal, WILDCARD_HOST, op, AclPermissionType.ALLOW))
            for op in self.operations
        ]

    def acls_arguments(self) -> list[str]:
        """The options of ``tributary acls add`` (kafka-acls') that create it."""
        option = {ResourceType.TOPIC: "--topic", ResourceType.GROUP: "--group"}[self.resource_type]
        argv = ["--allow-principal", self.principal]
        for op in self.operations:
            argv += ["--operation", op.kafka_name]
        argv += [option, self.name, "--resource-pattern-type", self.pattern_type.name.lower()]
        return argv


@dataclass(frozen=True)
class ClusterSecurity:
    """What one cluster's ZooKeeper must hold before its brokers start, and its brokers' settings."""

    cluster: str
    #: SCRAM users to create, in a stable order; all with ``mechanism``'s credential.
    users: tuple[str, ...]
    mechanism: str
    #: The user the brokers log in to each other as (None: they replicate without logging in).
    inter_broker_user: str | None
    authorizer: bool
    super_users: tuple[str, ...]
    grants: tuple[Grant, ...]

    @property
    def bindings(self) -> list[AclBinding]:
        return [binding for grant in self.grants for binding in grant.bindings()]


def _grants(topology: Topology, link: Link) -> list[Grant]:
    """What the link's client needs on its cluster (module docstring)."""
    topic, group = ResourceType.TOPIC, ResourceType.GROUP
    literal, prefixed = PatternType.LITERAL, PatternType.PREFIXED
    if link.role != "load":
        alias = link.owner
        mirror = topology.mirrors[alias]
        if link.role == "mirror source":
            return [
                Grant(link.user, topic, WILDCARD_RESOURCE, literal, (Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS)),
                Grant(link.user, group, mirror.group, literal, (Op.READ,)),
            ]
        writes = (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE)
        return [
            Grant(link.user, topic, f"{alias}.", prefixed, (*writes, Op.ALTER)),
            Grant(link.user, topic, DEFAULT_OFFSETS_TOPIC, literal, writes),
            Grant(link.user, group, mirror.group, literal, (Op.READ,)),
        ]
    feeding = sorted(m.alias for m in topology.mirrors.values() if m.target == link.cluster.name)
    names = [(f"{alias}.", prefixed) for alias in feeding] or [(WILDCARD_RESOURCE, literal)]
    return [Grant(link.user, topic, n, pattern, (Op.READ, Op.DESCRIBE)) for n, pattern in names]


def cluster_security(topology: Topology, cluster: Cluster) -> ClusterSecurity:
    """Users, super users and ACLs of ``cluster`` (module docstring); nothing for a cluster
    whose listeners do not authenticate."""
    mechanism = credential_mechanism(topology.security.sasl_mechanism)
    if not cluster.authenticates:
        return ClusterSecurity(cluster.name, (), mechanism, None, False, (), ())
    inter_broker = broker_user(cluster) if cluster.local_listener.sasl else None
    logging_in = [link for link in links(topology) if link.cluster.name == cluster.name and link.listener.sasl]
    users = [*([inter_broker] if inter_broker else []), ADMIN_USER, *dict.fromkeys(link.user for link in logging_in)]
    super_users = [f"User:{user}" for user in (inter_broker, ADMIN_USER) if user]
    if not all(listener.sasl for listener in cluster.listeners):
        super_users.append(ANONYMOUS)
    authorizer = topology.security.authorizer
    grants = [grant for link in logging_in for grant in _grants(topology, link)] if authorizer else []
    return ClusterSecurity(
        cluster.name, tuple(users), mechanism, inter_broker, authorizer, tuple(super_users), tuple(grants)
    )


__all__ = [
    "ADMIN_USER",
    "ANONYMOUS",
    "ClusterSecurity",
    "Grant",
    "broker_user",
    "cluster_security",
    "credential_mechanism",
]
