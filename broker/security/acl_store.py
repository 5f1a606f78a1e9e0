"""The ACLs in ZooKeeper, cached on every broker and kept current by watches.

Kafka's ``AclAuthorizer`` in ZooKeeper mode, its storage half: a ZooKeeper session of its own
(Kafka's authorizer has one too), Kafka's node layout (:mod:`broker.security.acl_znodes`), and an
immutable :class:`AclIndex` that request handlers read without awaiting or locking.

Keeping the cache current: each connection to ZooKeeper starts with a full read (every resource
node under both roots), after the change paths have been listed with a watch, so that no change
falls between the two. A change node appearing afterwards fires the watch; the broker reads it,
then re-reads the resource it names. Writers (CreateAcls, DeleteAcls on any broker, or Kafka's
tools) add a change node after every write, so every broker hears of every change, usually within
milliseconds. While ZooKeeper is unreachable the last index keeps being served.

Writing: a compare-and-set on the resource node's version, retried when another writer got there
first (so concurrent creations on different brokers never lose each other's entries); the node is
deleted with its last entry; then the change node. The writing broker updates its own cache at
once, so its next DescribeAcls shows the change. One lock orders the reads of resource nodes and
the writes on this broker: a read begun before a write can never land after it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import trio
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, ZookeeperError

from tributary.broker.cluster.errors import ClusterError, ZooKeeperUnavailableError
from tributary.broker.cluster.session import CONNECTION_ERRORS, ChangeNotifier, ZkSession
from tributary.broker.security import acl_znodes as znodes
from tributary.broker.security.authorizer import AclIndex
from tributary.protocol.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
)

logger = logging.getLogger(__name__)

Entries = frozenset[AccessControlEntry]
#: Seconds before a refresh ZooKeeper refused (for a reason other than the connection) is tried again.
RETRY_DELAY = 1.0


class AclWriteError(ClusterError):
    """An ACL change that could not be written (ZooKeeper unreachable, a node in a foreign shape)."""


@dataclass(frozen=True, slots=True)
class FilterDeletion:
    """What one DeleteAcls filter removed: each binding with None, or why it could not be."""

    deleted: tuple[tuple[AclBinding, str | None], ...]


def _now_ms() -> int:
    return int(time.time() * 1000)


class ZkAclStore:
    def __init__(
        self,
        zk_hosts: str,
        *,
        session_timeout: float = 18.0,
        connect_timeout: float = 15.0,
        reconnect_max_delay: float = 2.0,
        write_timeout: float = 30.0,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self._hosts = zk_hosts
        self._session_timeout = session_timeout
        self._connect_timeout = connect_timeout
        self._reconnect_max_delay = reconnect_max_delay
        self._write_timeout = write_timeout
        self._clock_ms = clock_ms
        self._notifier = ChangeNotifier()
        self._session: ZkSession | None = None
        self._index = AclIndex()
        self._lock = trio.Lock()
        self._changes_dirty = False
        self._synced_connection = 0
        # Change nodes already acted on, by path, with their creation time (for the purge).
        self._seen_changes: dict[str, int] = {}
        self._watch: Callable[[object], None] | None = None
        self.loads = 0  # full reads done: one per ZooKeeper connection

    @property
    def acls(self) -> AclIndex:
        """Every ACL as this broker knows them now."""
        return self._index

    @property
    def zk_client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the store's ZooKeeper session; for fault-injection tests."""
        return None if self._session is None else self._session.client_id

    # ---- lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, read every ACL, then keep the cache current until cancelled. Raises
        ZooKeeperUnavailableError (before ``task_status.started()``) when ZooKeeper does not
        answer within ``connect_timeout``."""
        session = ZkSession(
            self._hosts,
            self._notifier,
            session_timeout=self._session_timeout,
            reconnect_max_delay=self._reconnect_max_delay,
        )
        self._session = session
        self._watch = session.watcher(self._on_change)
        try:
            await session.open(self._connect_timeout)
            try:
                for path in znodes.PERSISTENT_PATHS:
                    await session.ensure_path(path)
                await self._load_all(session)
            except CONNECTION_ERRORS as exc:
                raise ZooKeeperUnavailableError(f"reading the ACLs: ZooKeeper unavailable ({exc!r})") from exc
            logger.info("ACL authorizer: %d ACLs on %d resources loaded", len(self._index), len(self._index.patterns))
            task_status.started()
            await self._follow(session)
        finally:
            self._session = None
            with trio.CancelScope(shield=True):
                await session.close()

    def _on_change(self, path: str) -> None:
        self._changes_dirty = True
        self._notifier.notify()

    def _has_work(self, session: ZkSession) -> bool:
        return self._changes_dirty or self._synced_connection != session.connection_count

    async def _follow(self, session: ZkSession) -> None:
        while True:
            await self._notifier.wait_until(lambda: session.connected and self._has_work(session))
            state_version = session.state_version
            try:
                if self._synced_connection != session.connection_count:
                    # kazoo forgot the watches when it disconnected, and changes made meanwhile fired nothing.
                    await self._load_all(session)
                else:
                    self._changes_dirty = False
                    await self._process_changes(session)
            except CONNECTION_ERRORS as exc:
                logger.debug("ACL refresh interrupted by %s; retrying after reconnection", type(exc).__name__)
                self._changes_dirty = True
                await session.wait_state_change(state_version)
            except ZookeeperError as exc:
                # Anything else ZooKeeper refuses (a foreign tool's odd node) must not stop the
                # broker: the ACLs it has keep being used, and the refresh is tried again.
                logger.warning("ACL refresh failed (%r); trying again in %g s", exc, RETRY_DELAY)
                self._changes_dirty = True
                await trio.sleep(RETRY_DELAY)

    # ---- reading

    async def _load_all(self, session: ZkSession) -> None:
        connection = session.connection_count
        self._changes_dirty = False
        # The change paths first, with their watch: whatever changes after this is heard of.
        changes = await self._list_changes(session)
        found = await session.get_many(changes)
        self._seen_changes = {
            path: int(node[1].ctime) for path, node in zip(changes, found, strict=True) if node is not None
        }
        patterns: list[ResourcePattern] = []
        for pattern_type, root in znodes.ROOTS.items():
            for type_segment in await self._children(session, root):
                try:
                    resource_type = znodes.resource_type_of(type_segment)
                except znodes.MalformedAclNodeError as exc:
                    logger.warning("ignoring ACLs under %s/%s: %s", root, type_segment, exc)
                    continue
                for name in await self._children(session, f"{root}/{type_segment}"):
                    patterns.append(ResourcePattern(resource_type, name, pattern_type))
        async with self._lock:
            nodes = await session.get_many([znodes.resource_path(p) for p in patterns])
            acls = {}
            for pattern, node in zip(patterns, nodes, strict=True):
                if node is not None:
                    acls[pattern] = self._decoded(pattern, node[0])
            self._index = AclIndex(acls)
        self._synced_connection = connection
        self.loads += 1
        await self._purge(session)

    async def _children(self, session: ZkSession, path: str) -> list[str]:
        try:
            return sorted(await session.children(path))
        except NoNodeError:
            return []

    async def _list_changes(self, session: ZkSession) -> list[str]:
        paths = []
        for pattern_type in znodes.ROOTS:
            parent = znodes.changes_path(pattern_type)
            while True:
                try:
                    children = await session.children(parent, watch=self._watch)
                    break
                except NoNodeError:
                    await session.ensure_path(parent)  # removed by hand: recreate it, keep watching
            paths += [f"{parent}/{c}" for c in sorted(children, key=lambda c: znodes.change_sequence(c) or -1)]
        return paths

    def _decoded(self, pattern: ResourcePattern, data: bytes) -> Entries:
        try:
            return znodes.decode_acls(data)
        except znodes.MalformedAclNodeError as exc:
            logger.warning("ignoring the malformed ACL node %s: %s", znodes.resource_path(pattern), exc)
            return frozenset()

    async def _process_changes(self, session: ZkSession) -> None:
        changes = await self._list_changes(session)
        listed = set(changes)
        for gone in [path for path in self._seen_changes if path not in listed]:
            del self._seen_changes[gone]
        new = [path for path in changes if path not in self._seen_changes]
        found = await session.get_many(new)
        changed: dict[ResourcePattern, None] = {}  # an ordered set
        for path, node in zip(new, found, strict=True):
            if node is None:
                continue
            self._seen_changes[path] = int(node[1].ctime)
            literal = path.startswith(znodes.LITERAL_CHANGES + "/")
            pattern_type = PatternType.LITERAL if literal else PatternType.PREFIXED
            try:
                changed[znodes.decode_change(pattern_type, node[0])] = None
            except znodes.MalformedAclNodeError as exc:
                logger.warning("ignoring the malformed ACL change node %s: %s", path, exc)
        for pattern in changed:
            await self._reread(session, pattern)
        await self._purge(session)

    async def _reread(self, session: ZkSession, pattern: ResourcePattern) -> None:
        if (why := znodes.name_error(pattern.name)) is not None:
            logger.warning("ignoring an ACL change node naming %s: %s", pattern, why)
            return
        async with self._lock:
            node = await session.get_or_none(znodes.resource_path(pattern))
            entries = frozenset() if node is None else self._decoded(pattern, node[0])
            if entries != self._index.entries(pattern):
                logger.info("ACLs of %s changed: %d now", pattern, len(entries))
                self._index = self._index.with_resource(pattern, entries)

    async def _purge(self, session: ZkSession) -> None:
        """Delete change nodes older than Kafka's 15 minutes: every broker has read them by then."""
        expired_before = self._clock_ms() - znodes.CHANGE_EXPIRATION_MS
        for path, created in list(self._seen_changes.items()):
            if created < expired_before:
                with contextlib.suppress(NoNodeError):
                    await session.delete(path)
                del self._seen_changes[path]

    # ---- writing

    @staticmethod
    def name_error(name: str) -> str | None:
        """Why a resource of this name cannot be stored here (ZooKeeper's node names), or None."""
        return znodes.name_error(name)

    def _require_session(self) -> ZkSession:
        session = self._session
        if session is None:
            raise AclWriteError("the ACL store is not running")
        return session

    async def create(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Add the (valid) bindings; for each, None or why it was not stored. Entries already
        there are not duplicated."""
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            by_pattern.setdefault(binding.pattern, []).append(index)
        results: list[str | None] = [None] * len(bindings)
        for pattern, indexes in by_pattern.items():
            if (why := znodes.name_error(pattern.name)) is not None:
                for i in indexes:
                    results[i] = why
                continue
            adding = frozenset(bindings[i].entry for i in indexes)

            def added(current: Entries, adding: Entries = adding) -> Entries:
                return current | adding

            try:
                await self._update(pattern, added)
            except AclWriteError as exc:
                for i in indexes:
                    results[i] = str(exc)
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[FilterDeletion]:
        """Remove every binding a filter matches; for each filter, what it removed. A binding
        matched by several filters is reported under the first. Patterns are found in the cache,
        and, for a filter naming one pattern exactly, in ZooKeeper too (it may hold a creation
        this broker has not heard of yet)."""
        patterns: dict[ResourcePattern, None] = dict.fromkeys(self._index.patterns)
        for f in filters:
            if f.pattern.matches_at_most_one and f.pattern.name is not None and not znodes.name_error(f.pattern.name):
                patterns[ResourcePattern(f.pattern.resource_type, f.pattern.name, f.pattern.pattern_type)] = None
        deleted: list[list[tuple[AclBinding, str | None]]] = [[] for _ in filters]
        for pattern in patterns:
            matching = [(i, f) for i, f in enumerate(filters) if f.pattern.matches(pattern)]
            if not matching:
                continue
            removed: dict[AccessControlEntry, int] = {}

            def without(
                current: Entries,
                matching: list[tuple[int, AclBindingFilter]] = matching,
                removed: dict[AccessControlEntry, int] = removed,
            ) -> Entries:
                removed.clear()
                for entry in current:
                    first = next((i for i, f in matching if f.entry.matches(entry)), None)
                    if first is not None:
                        removed[entry] = first
                return current - removed.keys()

            error: str | None = None
            try:
                await self._update(pattern, without)
            except AclWriteError as exc:
                error = str(exc)
            for entry, i in sorted(removed.items()):
                deleted[i].append((AclBinding(pattern, entry), error))
        return [FilterDeletion(tuple(found)) for found in deleted]

    async def _update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> None:
        """Apply ``change`` to the pattern's entries in ZooKeeper and in the cache. A lost
        connection is waited out (within the write timeout) and the write tried again; after
        one, a change node is written even when the node already shows the change (the write
        may have gone through unanswered, and its change node with it never written)."""
        session = self._require_session()
        uncertain = False
        with trio.move_on_after(self._write_timeout):
            while True:
                state_version = session.state_version
                try:
                    async with self._lock:
                        wanted = await self._compare_and_set(session, pattern, change, notify=uncertain)
                        self._index = self._index.with_resource(pattern, wanted)
                except CONNECTION_ERRORS as exc:
                    logger.info("writing the ACLs of %s: %s; retrying once ZooKeeper answers", pattern, exc)
                    uncertain = True
                    await session.wait_state_change(state_version)
                except ZookeeperError as exc:
                    raise AclWriteError(f"ZooKeeper refused the ACLs of {pattern}: {type(exc).__name__}") from exc
                else:
                    return
        raise AclWriteError(f"could not write the ACLs of {pattern} within {self._write_timeout:g} s")

    async def _compare_and_set(
        self, session: ZkSession, pattern: ResourcePattern, change: Callable[[Entries], Entries], *, notify: bool
    ) -> Entries:
        """Write ``change(current)`` to the resource's node (compare-and-set, retried) and add a
        change node when that changed anything (or ``notify``); returns what the node holds now."""
        path = znodes.resource_path(pattern)
        while True:
            node = await session.get_or_none(path)
            try:
                current = frozenset() if node is None else znodes.decode_acls(node[0])
            except znodes.MalformedAclNodeError as exc:
                raise AclWriteError(f"the ACL node {path} is malformed, not overwriting it: {exc}") from None
            wanted = change(current)
            if wanted != current:
                try:
                    if node is None:
                        await session.create(path, znodes.encode_acls(wanted), makepath=True)
                    elif not wanted:
                        await session.delete(path, version=node[1].version)
                    else:
                        await session.set(path, znodes.encode_acls(wanted), version=node[1].version)
                except (NodeExistsError, BadVersionError, NoNodeError, NotEmptyError):
                    continue  # another writer got there first: read again
            if wanted != current or notify:
                await session.create(
                    znodes.change_node_prefix(pattern.pattern_type), znodes.encode_change(pattern), sequence=True
                )
            return wanted

    # ---- reading for the API

    def describe(self, binding_filter: AclBindingFilter) -> Iterable[AclBinding]:
        return self._index.bindings(binding_filter)
