"""SCRAM users straight in a cluster's ZooKeeper, as ``kafka-configs --zookeeper`` writes them.

Kafka's ``/config/users/<name>`` node (the name sanitized as Kafka's ``Sanitizer`` does) holding
the salted keys, never the password, and a change notification every running broker follows.
Shared by `tributary users --zookeeper` and `tributary up`, which sets each cluster's users
before its brokers start. kazoo's blocking client: callers on a trio thread use a worker thread.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from tributary.broker.security.user_configs import (
    CONFIG_CHANGES,
    CONFIG_USERS,
    decode_credentials,
    desanitize,
    encode_change,
    sanitize,
    user_path,
    with_credential,
)
from tributary.protocol.sasl.scram import DEFAULT_ITERATIONS, MECHANISMS, ScramCredential, credential_from_password


class ZooKeeperUsersError(Exception):
    """ZooKeeper did not answer, or a user's node kept changing under the write."""


def _zk_client(hosts: str) -> Any:
    """A started kazoo client; the connect string's chroot is created first if missing (users are
    set before any broker ran, and brokers create it the same way, as Kafka does)."""
    servers, slash, chroot = hosts.partition("/")
    if slash and chroot.strip("/"):
        root = _started(servers)
        try:
            root.ensure_path("/" + chroot.strip("/"))
        finally:
            root.stop()
            root.close()
    return _started(hosts)


def _started(hosts: str) -> Any:
    client = KazooClient(hosts=hosts, timeout=10.0)
    try:
        client.start(timeout=10)
    except KazooTimeoutError:
        client.close()
        raise ZooKeeperUsersError(f"no ZooKeeper answered at {hosts} within 10 s") from None
    return client


def zk_write(hosts: str, name: str, mechanism: str, credential: ScramCredential | None) -> bool:
    """Set (or with None delete) one credential in ZooKeeper and announce it: what brokers do
    for AlterUserScramCredentials. False when deleting a credential that is not there."""

    client = _zk_client(hosts)
    try:
        path = user_path(name)
        for _ in range(10):
            try:
                data, stat = client.get(path)
            except NoNodeError:
                data, stat = None, None
            if credential is None and (data is None or mechanism not in decode_credentials(data)):
                return False
            new = with_credential(data, mechanism, credential)
            try:
                if stat is None:
                    assert new is not None
                    client.create(path, new, makepath=True)
                elif new is None:
                    client.delete(path, version=stat.version)
                else:
                    client.set(path, new, version=stat.version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            break
        else:
            raise ZooKeeperUsersError(f"the config of user {name!r} kept changing")
        client.create(f"{CONFIG_CHANGES}/config_change_", encode_change(name), makepath=True, sequence=True)
        return True
    finally:
        client.stop()
        client.close()


def zk_users(hosts: str, names: Sequence[str] | None = None) -> dict[str, dict[str, ScramCredential]]:
    """Every user's credentials (or those of ``names``) in the ZooKeeper at ``hosts``."""
    client = _zk_client(hosts)
    try:
        try:
            nodes = [sanitize(name) for name in names] if names is not None else client.get_children(CONFIG_USERS)
        except NoNodeError:
            return {}
        users: dict[str, dict[str, ScramCredential]] = {}
        for node in sorted(nodes):
            name = desanitize(node)
            try:
                credentials = decode_credentials(client.get(user_path(name))[0])
            except (NoNodeError, ValueError):
                continue
            if credentials:
                users[name] = credentials
        return users
    finally:
        client.stop()
        client.close()


def set_user(hosts: str, name: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> None:
    """Create or replace ``name``'s credential in ZooKeeper (for scripts and tests)."""
    zk_write(hosts, name, mechanism, credential_from_password(MECHANISMS[mechanism], password, iterations=iterations))


def matches(credential: ScramCredential, mechanism: str, password: str, iterations: int) -> bool:
    """Whether ``credential`` is what ``password`` gives with its salt at ``iterations``."""
    if credential.iterations != iterations:
        return False
    derived = credential_from_password(MECHANISMS[mechanism], password, salt=credential.salt, iterations=iterations)
    return hmac.compare_digest(derived.stored_key, credential.stored_key) and hmac.compare_digest(
        derived.server_key, credential.server_key
    )


def ensure_user(hosts: str, name: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> bool:
    """Set ``name``'s credential in ZooKeeper unless it already matches the password; whether
    it was written. (`tributary up` and the Ansible broker role set every user on each run.)"""
    current = zk_users(hosts, [name]).get(name, {}).get(mechanism)
    if current is not None and matches(current, mechanism, password, iterations):
        return False
    set_user(hosts, name, mechanism, password, iterations)
    return True


__all__ = ["ZooKeeperUsersError", "ensure_user", "matches", "set_user", "zk_users", "zk_write"]
