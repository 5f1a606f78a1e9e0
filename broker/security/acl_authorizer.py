"""The broker's authorizer: Kafka's ``AclAuthorizer``, what request handlers ask through
``RequestContext.authorize``.

It puts together the decision (:func:`broker.security.authorizer.authorize`, a pure function),
the ACLs this broker has cached from ZooKeeper (:class:`broker.security.acl_store.ZkAclStore`),
the settings (``super.users``, ``allow.everyone.if.no.acl.found``), the audit log and the metrics.
Without ``authorizer.class.name`` it holds no store and allows everything, as a Kafka broker
without an authorizer does; the ACL APIs then answer SECURITY_DISABLED.

Denials are logged (Kafka's ``kafka.authorizer.logger`` line: principal, operation, host, resource,
request) at most once per principal every ten seconds, with how many were not logged: a client
retrying what it may not do must not flood the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio
from prometheus_client import CollectorRegistry

from tributary.broker.connection_limits import RateLimitedLog
from tributary.broker.metrics import api_name
from tributary.broker.security.acl_store import ZkAclStore
from tributary.broker.security.authorizer import AclIndex, authorize, authorize_any
from tributary.broker.security.authorizer_config import AuthorizerConfig
from tributary.broker.security.authorizer_metrics import AuthorizerMetrics
from tributary.broker.security.principal import KafkaPrincipal
from tributary.protocol.acl import AclOperation, ResourcePattern, ResourceType

audit = logging.getLogger("tributary.broker.authorizer")

#: Seconds between two logged denials of one principal.
DENIAL_LOG_INTERVAL = 10.0


class AclAuthorizer:
    def __init__(
        self,
        config: AuthorizerConfig,
        zookeeper: str,
        *,
        session_timeout: float = 18.0,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.config = config
        self.store = ZkAclStore(zookeeper, session_timeout=session_timeout) if config.enabled else None
        self.metrics = AuthorizerMetrics(lambda: len(self.acls))
        if registry is not None and self.store is not None:
            registry.register(self.metrics)
        self._denials = RateLimitedLog(audit, DENIAL_LOG_INTERVAL, clock)

    @property
    def enabled(self) -> bool:
        return self.store is not None

    @property
    def acls(self) -> AclIndex:
        return AclIndex() if self.store is None else self.store.acls

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the ACLs and keep them current (returns at once without an authorizer)."""
        if self.store is None:
            task_status.started()
            return
        await self.store.run(task_status=task_status)

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        api_key: int,
        log_denied: bool = True,
    ) -> bool:
        """Whether the request may perform ``operation`` on the resource; a refusal of something
        the request named (``log_denied``) is logged and counted."""
        store = self.store
        if store is None:
            return True
        config = self.config
        decision = authorize(
            principal, host, operation, resource_type, name, acls=store.acls,
            super_users=config.super_users,
            allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
        )  # fmt: skip
        if decision.allowed:
            self.metrics.count_allowed()
        elif log_denied:
            api = api_name(api_key)
            self.metrics.count_denied(api, operation, resource_type)
            self._denials.note(
                str(principal),
                f"Principal = {principal} is Denied Operation = {operation.kafka_name} from host = {host} "
                f"on resource = {ResourcePattern(resource_type, name)} for request = {api} ({decision.reason.value})",
            )
        return decision.allowed

    def authorize_any(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may perform ``operation`` on some resource of the type."""
        store = self.store
        if store is None:
            return True
        return authorize_any(
            principal, host, operation, resource_type, store.acls,
            super_users=self.config.super_users,
            allow_everyone_if_no_acl_found=self.config.allow_everyone_if_no_acl_found,
        )  # fmt: skip
