"""A trio face on a kazoo client.

kazoo runs its own threads: a connection thread, and worker threads that deliver request
completions and watch events. Nothing here blocks the trio thread on them. Each request uses
kazoo's `*_async` form, whose completion callback (on a kazoo thread) only schedules a trio
Event through the run's TrioToken; the calling task parks on that Event, so it stays cancellable
and no trio worker thread is tied up. Watch callbacks and connection-state changes cross over the
same way and only touch state on the trio thread. Only stopping the client blocks (it joins
kazoo's threads); that runs in a short-lived thread of its own, so nothing lingers afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import trio
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState
from kazoo.retry import KazooRetry

from tributary.broker.cluster.errors import RegistryNotRunningError, ZooKeeperUnavailableError

logger = logging.getLogger(__name__)

# Errors that mean "ZooKeeper is not reachable right now", not "the request was wrong".
# ConnectionClosedError (client stopped) is a SessionExpiredError.
CONNECTION_ERRORS: tuple[type[Exception], ...] = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)

# kazoo's ZnodeStat (a namedtuple: version, ephemeralOwner, ...); kazoo ships no type hints.
Stat = Any


class ChangeNotifier:
    """Wakes every waiter whenever anything observable changed; waiters re-check their condition.

    Level-triggered on purpose: a waiter that missed several changes still sees the latest state,
    and no change is lost between checking a condition and starting to wait (both happen on the
    trio thread without a checkpoint in between).
    """

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        event, self._event = self._event, trio.Event()
        event.set()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self._event.wait()


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    value: bytes = b""
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    value: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check


class TransactionFailedError(Exception):
    """A multi-op transaction was refused; `index` names the operation that failed."""

    def __init__(self, index: int, op: Op, error: Exception) -> None:
        super().__init__(f"transaction op {index} ({op}) failed: {type(error).__name__}")
        self.index = index
        self.op = op
        self.error = error


async def run_in_own_thread(fn: Callable[[], object]) -> None:
    """Run a blocking call in a fresh thread that ends with it (trio's thread cache would keep one)."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            failure.append(exc)
        finally:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

    thread = threading.Thread(target=target, name="tributary-zk-close", daemon=True)
    thread.start()
    await done.wait()
    thread.join()
    if failure:
        raise failure[0]


class ZkSession:
    """One kazoo client and what the trio side knows about its connection.

    Attributes read by the registry and the controller (all changed on the trio thread only):
    `connected`; `session_id` (None while no session); `generation`, bumped whenever a session
    ends or a new one begins (ephemeral nodes of an older generation are gone); `connection_count`,
    bumped on every (re)connection, after which watches must be set again because kazoo drops its
    watchers on every disconnection; `state_version`, bumped on any state change.
    """

    def __init__(
        self, hosts: str, notifier: ChangeNotifier, *, session_timeout: float, reconnect_max_delay: float
    ) -> None:
        self.hosts = hosts
        self._notifier = notifier
        self._session_timeout = session_timeout
        self._reconnect_max_delay = reconnect_max_delay
        self._client: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.connected = False
        self.session_id: int | None = None
        self.generation = 0
        self.connection_count = 0
        self.state_version = 0
        self.past_session_ids: set[int] = set()

    # lifecycle

    async def open(self, timeout: float) -> None:
        self._token = trio.lowlevel.current_trio_token()
        await self._ensure_chroot(timeout)
        client = KazooClient(
            hosts=self.hosts,
            timeout=self._session_timeout,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=self._reconnect_max_delay),
            command_retry=KazooRetry(max_tries=0),
        )
        client.add_listener(self._on_kazoo_state)
        self._client = client
        client.start_async()
        with trio.move_on_after(timeout):
            await self._notifier.wait_until(lambda: self.connected)
        if not self.connected:
            raise ZooKeeperUnavailableError(f"no ZooKeeper answered at {self.hosts} within {timeout:g} s")

    async def _ensure_chroot(self, timeout: float) -> None:
        """Create the connect string's chroot path if it is missing, as Kafka does: a session
        rooted at a path that does not exist can create nothing."""
        servers, slash, chroot = self.hosts.partition("/")
        if not slash or not chroot.strip("/"):
            return

        def ensure() -> None:
            client = KazooClient(hosts=servers, timeout=self._session_timeout)
            try:
                client.start(timeout=timeout)
                client.ensure_path("/" + chroot.strip("/"))
                client.stop()
            except KazooTimeoutError:
                pass  # open() reports the unreachable ensemble with its own message
            finally:
                client.close()

        await run_in_own_thread(ensure)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        client.remove_listener(self._on_kazoo_state)
        self.connected = False
        self.session_id = None
        self.generation += 1
        self.state_version += 1
        try:
            # stop() closes the session (the server drops its ephemeral nodes) and joins kazoo's threads.
            await run_in_own_thread(client.stop)
        finally:
            client.close()
            self._notifier.notify()

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        client = self._client
        return None if client is None else cast("tuple[int, bytes] | None", client.client_id)

    # kazoo thread -> trio thread

    def _call_soon(self, fn: Callable[..., object], *args: object) -> None:
        token = self._token
        if token is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(fn, *args)

    def _on_kazoo_state(self, state: Any) -> None:
        # Called on kazoo's connection thread: must not block and must not touch trio state.
        self._call_soon(self._apply_state, state)

    def _apply_state(self, state: Any) -> None:
        client = self._client
        if client is None:
            return
        self.state_version += 1
        if state == KazooState.CONNECTED:
            client_id = client.client_id
            if client_id is not None:
                session_id = int(client_id[0])
                if session_id != self.session_id:
                    if self.session_id is not None:
                        self.past_session_ids.add(self.session_id)
                    self.session_id = session_id
                    self.generation += 1
                self.connected = True
                self.connection_count += 1
                logger.info("ZooKeeper connected (session 0x%x)", session_id)
        elif state == KazooState.SUSPENDED:
            self.connected = False
            logger.warning("ZooKeeper connection suspended; serving the last snapshot")
        elif state == KazooState.LOST:
            self.connected = False
            if self.session_id is not None:
                self.past_session_ids.add(self.session_id)
                logger.warning("ZooKeeper session 0x%x lost", self.session_id)
            self.session_id = None
            self.generation += 1
        self._notifier.notify()

    def watcher(self, on_path: Callable[[str], None]) -> Callable[[Any], None]:
        """A kazoo watch callback that calls `on_path(path)` on the trio thread.

        Keep the returned function and pass the same object to every read: kazoo keeps one set of
        watchers per path, so re-arming with the same function does not pile up callbacks.
        """

        def watch(event: Any) -> None:
            # kazoo sends NONE events with no path when it drops watchers on disconnection;
            # the state listener already schedules a full re-read for that.
            if event.type == EventType.NONE or event.path is None:
                return
            self._call_soon(on_path, event.path)

        return watch

    async def wait_state_change(self, since: int) -> None:
        await self._notifier.wait_until(lambda: self.state_version != since)

    # requests

    def _require_client(self) -> Any:
        if self._client is None:
            raise RegistryNotRunningError("the ZooKeeper session is closed")
        return self._client

    async def _wait(self, result: Any) -> Any:
        token = self._token
        assert token is not None
        done = trio.Event()

        def on_ready(_: Any) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

        result.rawlink(on_ready)
        await done.wait()
        return result.get(block=False)

    async def get(self, path: str, watch: Callable[[Any], None] | None = None) -> tuple[bytes, Stat]:
        value = await self._wait(self._require_client().get_async(path, watch=watch))
        return cast("tuple[bytes, Stat]", value)

    async def get_or_none(self, path: str, watch: Callable[[Any], None] | None = None) -> tuple[bytes, Stat] | None:
        try:
            return await self.get(path, watch)
        except NoNodeError:
            return None

    async def get_many(
        self, paths: Sequence[str], watch: Callable[[Any], None] | None = None
    ) -> list[tuple[bytes, Stat] | None]:
        """Read many nodes in one round trip (None for a missing one): all requests go out first."""
        client = self._require_client()
        pending = [client.get_async(path, watch=watch) for path in paths]
        results: list[tuple[bytes, Stat] | None] = []
        for result in pending:
            try:
                results.append(cast("tuple[bytes, Stat]", await self._wait(result)))
            except NoNodeError:
                results.append(None)
        return results

    async def exists_many(self, paths: Sequence[str]) -> list[Stat | None]:
        client = self._require_client()
        pending = [client.exists_async(path) for path in paths]
        return [await self._wait(result) for result in pending]

    async def children(self, path: str, watch: Callable[[Any], None] | None = None) -> list[str]:
        value = await self._wait(self._require_client().get_children_async(path, watch=watch))
        return cast("list[str]", value)

    async def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> Stat | None:
        return await self._wait(self._require_client().exists_async(path, watch=watch))

    async def create(
        self, path: str, value: bytes = b"", *, ephemeral: bool = False, makepath: bool = False, sequence: bool = False
    ) -> str:
        """Create a node; with ``sequence``, ZooKeeper appends a counter to the name. Returns the path made."""
        result = self._require_client().create_async(
            path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath
        )
        return cast("str", await self._wait(result))

    async def set(self, path: str, value: bytes, version: int = -1) -> Stat:
        return await self._wait(self._require_client().set_async(path, value, version=version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._wait(self._require_client().delete_async(path, version=version))

    async def ensure_path(self, path: str) -> None:
        await self._wait(self._require_client().ensure_path_async(path))

    async def commit(self, ops: Sequence[Op]) -> list[Any]:
        """Apply all of `ops` atomically, or none: raises TransactionFailedError on refusal."""
        transaction = self._require_client().transaction()
        for op in ops:
            match op:
                case Create():
                    transaction.create(op.path, op.value, ephemeral=op.ephemeral)
                case SetData():
                    transaction.set_data(op.path, op.value, version=op.version)
                case Delete():
                    transaction.delete(op.path, version=op.version)
                case Check():
                    transaction.check(op.path, op.version)
        results = cast("list[Any]", await self._wait(transaction.commit_async()))
        for index, result in enumerate(results):
            # ZooKeeper marks the operations around the culprit as rolled back or not applied.
            if isinstance(result, Exception) and not isinstance(result, RolledBackError | RuntimeInconsistency):
                raise TransactionFailedError(index, ops[index], result)
        return results
