"""``tributary acls --zookeeper HOST:PORT[/chroot]``: the ACLs written straight into ZooKeeper.

What ``kafka-acls --authorizer-properties zookeeper.connect=...`` does: read and write Kafka's
``/kafka-acl`` nodes directly, through the broker's own store (broker/security/acl_store.py:
compare-and-set on each resource's node, then a change notification every running broker follows).
It is the way to give the first ACLs before any broker runs, as `tributary users --zookeeper`
gives the first users: the Ansible broker role runs both before it starts the brokers.

:class:`ZkAcls` has the three ACL methods of :class:`tributary.client.admin.Admin` that
``tributary acls`` uses, so list, add and remove behave the same either way. Bindings are checked
as the CreateAcls handler checks them, and adding counts what was not there yet (``added``), so
that a deployment tool can tell a change from a no-op.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

from tributary.broker.cluster.errors import ClusterError
from tributary.broker.cluster.session import ChangeNotifier, ZkSession
from tributary.broker.security.acl_store import ZkAclStore
from tributary.deploy.cli.admin_options import FAILED, CommandError
from tributary.deploy.errors import operator_errors
from tributary.protocol.acl import ANY_BINDING, AclBinding, AclBindingFilter, binding_error


class ZkAcls:
    """The ACL calls of ``Admin``, on a running :class:`ZkAclStore`."""

    def __init__(self, store: ZkAclStore) -> None:
        self.store = store
        #: How many bindings the last ``create_acls`` added (the others were there already).
        self.added = 0

    async def describe_acls(self, binding_filter: AclBindingFilter = ANY_BINDING) -> list[AclBinding]:
        return list(self.store.acls.bindings(binding_filter))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        for binding in bindings:
            if (why := binding_error(binding) or self.store.name_error(binding.pattern.name)) is not None:
                raise CommandError(f"ACL {binding.pattern}: {why}")
        present = set(self.store.acls.bindings())
        self.added = len(set(bindings) - present)
        for binding, error in zip(bindings, await self.store.create(bindings), strict=True):
            if error is not None:
                raise CommandError(f"ACL {binding.pattern}: {error}", FAILED)

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        removed: list[list[AclBinding]] = []
        for deletion in await self.store.delete(filters):
            failed = [(binding, error) for binding, error in deletion.deleted if error is not None]
            if failed:
                binding, error = failed[0]
                raise CommandError(f"ACL {binding.pattern}: {error}", FAILED)
            removed.append([binding for binding, _ in deletion.deleted])
        return removed


async def _ensure_chroot(hosts: str, timeout: float) -> None:
    """The cluster's chroot, created if missing (ACLs may come before any broker made it)."""
    servers, slash, chroot = hosts.partition("/")
    if not (slash and chroot.strip("/")):
        return
    session = ZkSession(servers, ChangeNotifier(), session_timeout=10.0, reconnect_max_delay=1.0)
    try:
        await session.open(timeout)
        await session.ensure_path("/" + chroot.strip("/"))
    finally:
        await session.close()


def run_zookeeper(hosts: str, operation: Callable[[ZkAcls], Awaitable[int]], timeout: float = 10.0) -> int:
    """Run ``operation`` on the ACLs in ZooKeeper at ``hosts``; CommandError when ZooKeeper does
    not answer within ``timeout`` seconds."""

    async def main() -> int:
        await _ensure_chroot(hosts, timeout)
        store = ZkAclStore(hosts, connect_timeout=timeout, reconnect_max_delay=1.0, write_timeout=timeout)
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            try:
                return await operation(ZkAcls(store))
            finally:
                nursery.cancel_scope.cancel()

    try:
        return trio.run(main)
    except (ClusterError, CommandError, BaseExceptionGroup) as exc:
        errors = operator_errors(exc, (ClusterError, CommandError))
        if errors is None:
            raise
        first = errors[0]
        if isinstance(first, ClusterError):
            raise CommandError(f"ZooKeeper {hosts}: {first}", FAILED) from None
        raise first from None


def zookeeper_connect(args_zookeeper: str | None, authorizer_properties: Sequence[str]) -> str | None:
    """``--zookeeper``, or ``zookeeper.connect`` of kafka-acls' ``--authorizer-properties``."""
    for item in authorizer_properties:
        key, sep, value = item.partition("=")
        if not sep:
            raise CommandError(f"--authorizer-properties {item!r} is not KEY=VALUE")
        if key.strip() != "zookeeper.connect":
            raise CommandError(f"--authorizer-properties: only zookeeper.connect is understood, not {key.strip()!r}")
        if args_zookeeper and args_zookeeper != value.strip():
            raise CommandError("--zookeeper and --authorizer-properties zookeeper.connect name different servers")
        args_zookeeper = value.strip()
    return args_zookeeper or None


__all__ = ["ZkAcls", "run_zookeeper", "zookeeper_connect"]
