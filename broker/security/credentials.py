"""Every broker's copy of the users' SCRAM credentials, kept current from ZooKeeper.

Theory of operation
-------------------
The cache reads every ``/config/users/<name>`` node when it starts and again after every
reconnection (kazoo forgets its watches when the connection drops, and changes made meanwhile
fired nothing). Between those full reads it follows the change notifications, Kafka's way: a
children watch on ``/config/changes`` fires for each new ``config_change_<n>``, and every
notification numbered above the last one handled names a user whose node is read again (a
missing node: the user is gone). The notifications' listing comes before the full read, so
a change made during the read is either in it or announced after it. Notifications older than
15 minutes are deleted by whoever sees them, as Kafka's brokers do.

Lookups (:meth:`CredentialCache.lookup`) are dictionary reads on the trio thread: an
authentication never waits for ZooKeeper. Writes (AlterUserScramCredentials) go to ZooKeeper
with a version check, then announce the change; the writer's own cache learns of it like
every other broker's.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

import trio
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from tributary.broker.cluster.session import CONNECTION_ERRORS, ZkSession
from tributary.broker.security.user_configs import (
    CHANGE_EXPIRATION_MS,
    CONFIG_CHANGES,
    CONFIG_USERS,
    change_sequence,
    decode_change,
    decode_credentials,
    desanitize,
    encode_change,
    user_path,
    with_credential,
)
from tributary.protocol.sasl.scram import ScramCredential

log = logging.getLogger(__name__)


class CredentialStoreError(Exception):
    """A write that could not be made (ZooKeeper unavailable, or the node kept changing)."""


class NoSuchCredential(CredentialStoreError):
    """A deletion of a credential the user does not have."""


class CredentialCache:
    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._session: ZkSession | None = None
        self._last_change = -1
        self._wake = trio.Event()
        #: Bumped after every applied read (tests and AlterUserScramCredentials wait on it).
        self.version = 0
        self._changed = trio.Event()

    # --- reads ---------------------------------------------------------------------------------

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """user -> mechanism -> credential, a copy."""
        return {user: dict(creds) for user, creds in self._users.items()}

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds (re-checked after each applied change)."""
        while not predicate():
            await self._changed.wait()

    # --- following ZooKeeper -------------------------------------------------------------------

    async def run(self, session: ZkSession, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load, then follow changes until cancelled; started once the first load is done
        (or, if ZooKeeper is away at start, at once: the cache fills when it returns)."""
        self._session = session
        watch = session.watcher(self._on_watch)
        synced_connection = -1
        started = False
        while True:
            state = session.state_version
            if session.connected:
                try:
                    if synced_connection != session.connection_count:
                        connection = session.connection_count
                        await self._full_read(session, watch)
                        synced_connection = connection
                    else:
                        await self._follow(session, watch)
                except CONNECTION_ERRORS as exc:
                    log.debug("credential refresh interrupted by %s; retrying after reconnection", type(exc).__name__)
            if not started:
                task_status.started()
                started = True
            await self._wait(session, state)

    def _on_watch(self, _path: str) -> None:
        self._wake.set()

    async def _wait(self, session: ZkSession, state: int) -> None:
        if self._wake.is_set() and session.connected:
            self._wake = trio.Event()
            return
        async with trio.open_nursery() as nursery:

            async def state_changed() -> None:
                await session.wait_state_change(state)
                nursery.cancel_scope.cancel()

            async def watched() -> None:
                await self._wake.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(state_changed)
            nursery.start_soon(watched)
        if self._wake.is_set():
            self._wake = trio.Event()

    async def _changes(self, session: ZkSession, watch: object) -> list[tuple[int, str]]:
        while True:
            try:
                children = await session.children(CONFIG_CHANGES, watch=watch)  # type: ignore[arg-type]
            except NoNodeError:
                await session.ensure_path(CONFIG_CHANGES)
                continue
            found = [(seq, child) for child in children if (seq := change_sequence(child)) is not None]
            return sorted(found)

    async def _full_read(self, session: ZkSession, watch: object) -> None:
        changes = await self._changes(session, watch)
        try:
            names = await session.children(CONFIG_USERS)
        except NoNodeError:
            names = []
        users = [desanitize(node) for node in names]
        nodes = await session.get_many([user_path(user) for user in users])
        fresh: dict[str, dict[str, ScramCredential]] = {}
        for user, node in zip(users, nodes, strict=True):
            if node is None:
                continue
            try:
                credentials = decode_credentials(node[0])
            except ValueError as exc:
                log.warning("ignoring the malformed credentials of user %r: %s", user, exc)
                continue
            if credentials:
                fresh[user] = credentials
        self._users = fresh
        if changes:
            self._last_change = max(self._last_change, changes[-1][0])
        self._applied()
        log.info("SCRAM credentials loaded for %d users", len(fresh))
        await self._purge(session, changes)

    async def _follow(self, session: ZkSession, watch: object) -> None:
        changes = await self._changes(session, watch)
        new = [(seq, node) for seq, node in changes if seq > self._last_change]
        if not new:
            return
        nodes = await session.get_many([f"{CONFIG_CHANGES}/{node}" for _, node in new])
        users: set[str] = set()
        for (seq, node), data in zip(new, nodes, strict=True):
            self._last_change = max(self._last_change, seq)
            if data is None:
                continue
            change = decode_change(data[0])
            if change is None:
                log.warning("ignoring malformed config change notification %s", node)
            elif change[0] == "users":
                users.add(change[1])
        for user in sorted(users):
            await self._read_user(session, user)
        self._applied()
        await self._purge(session, changes)

    async def _read_user(self, session: ZkSession, user: str) -> None:
        node = await session.get_or_none(user_path(user))
        if node is None:
            self._users.pop(user, None)
            log.info("SCRAM credentials of user %r removed", user)
            return
        try:
            credentials = decode_credentials(node[0])
        except ValueError as exc:
            log.warning("ignoring the malformed credentials of user %r: %s", user, exc)
            return
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)
        log.info("SCRAM credentials of user %r now: %s", user, ", ".join(sorted(credentials)) or "none")

    async def _purge(self, session: ZkSession, changes: list[tuple[int, str]]) -> None:
        """Delete notifications older than Kafka's 15 minutes (all but the newest, always kept)."""
        if len(changes) < 2:
            return
        stats = await session.exists_many([f"{CONFIG_CHANGES}/{node}" for _, node in changes[:-1]])
        cutoff = time.time() * 1000 - CHANGE_EXPIRATION_MS
        for (_, node), stat in zip(changes[:-1], stats, strict=True):
            if stat is not None and stat.ctime < cutoff:
                with contextlib.suppress(NoNodeError):
                    await session.delete(f"{CONFIG_CHANGES}/{node}")

    def _applied(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    # --- writes --------------------------------------------------------------------------------

    async def write(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        """Set (or, with None, delete) one credential of ``user``, then announce the change.
        Raises NoSuchCredential for deleting one the user does not have."""
        session = self._session
        if session is None or not session.connected:
            raise CredentialStoreError("ZooKeeper is not connected")
        path = user_path(user)
        try:
            for _ in range(10):
                node = await session.get_or_none(path)
                if credential is None and (node is None or mechanism not in decode_credentials(node[0])):
                    raise NoSuchCredential(f"user {user!r} has no {mechanism} credential")
                data = with_credential(node[0] if node is not None else None, mechanism, credential)
                try:
                    if node is None:
                        assert data is not None
                        await session.create(path, data, makepath=True)
                    elif data is None:
                        await session.delete(path, version=node[1].version)
                    else:
                        await session.set(path, data, version=node[1].version)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # changed under us: read it again
                break
            else:
                raise CredentialStoreError(f"the config of user {user!r} kept changing")
            await session.create(f"{CONFIG_CHANGES}/config_change_", encode_change(user), makepath=True, sequence=True)
        except CONNECTION_ERRORS as exc:
            raise CredentialStoreError(f"ZooKeeper unavailable ({type(exc).__name__})") from exc
        except ValueError as exc:
            raise CredentialStoreError(f"the stored config of user {user!r} is malformed: {exc}") from exc


__all__ = ["CredentialCache", "CredentialStoreError", "NoSuchCredential"]
