"""The ACL authorizer's settings, with Kafka's names and defaults.

``authorizer.class.name`` turns it on. Kafka's two ACL authorizers are accepted as its value and
mean the same here (ACLs in ZooKeeper, Kafka's layout): ``kafka.security.authorizer.AclAuthorizer``
(ZooKeeper mode) and ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (KRaft's name,
for configs carried over); empty, the default, leaves every request authorized. Anything else is
refused at start: a broker that silently ignored a custom authorizer would run wide open.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.broker.security.principal import KafkaPrincipal

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACCEPTED_CLASS_NAMES = (ACL_AUTHORIZER, STANDARD_AUTHORIZER)


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    #: authorizer.class.name: "" (no authorizer) or one of ACCEPTED_CLASS_NAMES.
    class_name: str = ""
    #: super.users: principals allowed everything, whatever the ACLs say.
    super_users: frozenset[KafkaPrincipal] = frozenset()
    #: allow.everyone.if.no.acl.found: a resource without any ACL is open to everyone.
    allow_everyone_if_no_acl_found: bool = False

    def __post_init__(self) -> None:
        if self.class_name and self.class_name not in ACCEPTED_CLASS_NAMES:
            raise ValueError(
                f"setting 'authorizer.class.name' = {self.class_name!r} is not supported: Tributary's ACL "
                f"authorizer answers to {' or '.join(ACCEPTED_CLASS_NAMES)} (or leave it empty for none)"
            )

    @property
    def enabled(self) -> bool:
        return bool(self.class_name)


def parse_super_users(value: str) -> frozenset[KafkaPrincipal]:
    """Kafka's ``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(KafkaPrincipal.parse(item.strip()) for item in value.split(";") if item.strip())
