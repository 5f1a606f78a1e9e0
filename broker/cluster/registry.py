"""ClusterRegistry: one broker's membership in the cluster and its live view of it.

Lifecycle (structured concurrency): `await nursery.start(registry.run)` returns once the broker is
registered (`/brokers/ids/<id>`) and holds a first snapshot; the registry then keeps that snapshot
current through watches and takes part in controller election until `run` is cancelled, when it
deletes its ephemeral nodes and closes the ZooKeeper session.

Reading the cluster: `registry.snapshot` is an immutable ClusterSnapshot, swapped as a whole on
every change, so request handlers read it without awaiting or locking. While ZooKeeper is
unreachable the last snapshot keeps being served. After a session expiry the registry registers
again, re-reads everything and re-arms its watches.

Reacting to changes: `wait_for(predicate)` waits for a condition; `snapshots()` yields every new
snapshot; `assignment_changes()` yields which partition replicas this broker gained or lost (what
the broker consumes to create and delete local logs), see its docstring.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import trio
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from tributary.broker.cluster import zk_paths
from tributary.broker.cluster.controller import Controller, LeaderBalance
from tributary.broker.cluster.errors import (
    BrokerIdInUseError,
    ClusterError,
    ControllerUnavailableError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    RegistryNotRunningError,
    TopicCreationRejectedError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperUnavailableError,
)
from tributary.broker.cluster.model import (
    NO_LEADER,
    AssignmentChange,
    BrokerInfo,
    ClusterSnapshot,
    PartitionState,
    ReplicaKey,
    TopicInfo,
)
from tributary.broker.cluster.session import (
    CONNECTION_ERRORS,
    ChangeNotifier,
    Delete,
    Op,
    TransactionFailedError,
    ZkSession,
)
from tributary.broker.cluster.znodes import (
    CONTROLLED_SHUTDOWN_DONE,
    CreatePartitionsRequest,
    CreateTopicRequest,
    LeaderAndIsr,
    Moving,
    decode_broker,
    decode_cluster_id,
    decode_config,
    decode_controller,
    decode_moving,
    decode_partition_state,
    decode_producer_id_block,
    decode_topic,
    encode_broker,
    encode_cluster_id,
    encode_config,
    encode_create_partitions_request,
    encode_create_request,
    encode_partition_state,
    encode_preferred_election,
    encode_producer_id_block,
    encode_reassignment,
    new_uuid,
)

logger = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
# Beyond the session timeout, how long a starting broker waits for a stale registration of its id.
REGISTRATION_WAIT_MARGIN = 2.0
_SHUTDOWN_ERRORS: tuple[type[Exception], ...] = (*CONNECTION_ERRORS, TransactionFailedError, RegistryNotRunningError)
MAX_PRODUCER_ID = 2**63 - 1


@contextlib.contextmanager
def _zookeeper_errors(what: str) -> Iterator[None]:
    try:
        yield
    except CONNECTION_ERRORS as exc:
        raise ZooKeeperUnavailableError(f"{what}: ZooKeeper unavailable ({type(exc).__name__})") from exc


class ClusterRegistry:
    def __init__(
        self,
        zk_hosts: str,
        broker: BrokerInfo,
        *,
        session_timeout: float = 6.0,
        connect_timeout: float = 15.0,
        reconnect_max_delay: float = 2.0,
        shutdown_timeout: float = 5.0,
        balance: LeaderBalance | None = None,
    ) -> None:
        """`zk_hosts` is a kazoo connection string, optionally with a chroot: "h1:2181,h2:2181/tributary"."""
        self._hosts = zk_hosts
        self._broker = broker
        self._session_timeout = session_timeout
        self._connect_timeout = connect_timeout
        self._reconnect_max_delay = reconnect_max_delay
        self._shutdown_timeout = shutdown_timeout
        self._balance = balance
        self._notifier = ChangeNotifier()
        self._session: ZkSession | None = None
        self._controller: Controller | None = None
        self._snapshot = ClusterSnapshot.empty()
        self._started = False
        self._stopped = False
        # What the watches told us so far; only the refresher task writes these.
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._controller_id: int | None = None
        self._cluster_id = ""
        self._dirty: set[str] = set()
        self._synced_connection = 0
        self._registered_session: int | None = None
        self._watch: Callable[[Any], None] | None = None

    # ---- state

    @property
    def broker(self) -> BrokerInfo:
        return self._broker

    @property
    def broker_id(self) -> int:
        return self._broker.id

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The latest view of the cluster; possibly stale while `connected` is False."""
        return self._snapshot

    @property
    def running(self) -> bool:
        return self._started and not self._stopped

    @property
    def connected(self) -> bool:
        return self._session is not None and self._session.connected

    @property
    def registered(self) -> bool:
        """Whether `/brokers/ids/<id>` exists for the current ZooKeeper session."""
        session = self._session
        return session is not None and session.session_id is not None and self._registered_session == session.session_id

    @property
    def is_controller(self) -> bool:
        return self._controller is not None and self._controller.active

    @property
    def zk_session(self) -> ZkSession:
        """The ZooKeeper session (once :meth:`run` has started), for components that follow
        ZooKeeper beside the registry (the credential cache)."""
        if self._session is None:
            raise RegistryNotRunningError("the cluster registry has not started")
        return self._session

    @property
    def session_id(self) -> int | None:
        return None if self._session is None else self._session.session_id

    @property
    def zk_client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the live ZooKeeper session; for fault-injection tests."""
        return None if self._session is None else self._session.client_id

    # ---- lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register, then keep the view current; on cancellation deregister and close the session.

        Raises BrokerIdInUseError (before `task_status.started()`) when a live session already
        holds this broker id, and ZooKeeperUnavailableError when ZooKeeper does not answer within
        `connect_timeout`. A registry runs once; make a new one to rejoin.
        """
        if self._started:
            raise RuntimeError("a ClusterRegistry runs only once")
        self._started = True
        session = ZkSession(
            self._hosts,
            self._notifier,
            session_timeout=self._session_timeout,
            reconnect_max_delay=self._reconnect_max_delay,
        )
        self._session = session
        self._watch = session.watcher(self._mark_dirty)
        self._controller = Controller(
            session,
            broker_id=self._broker.id,
            snapshot=lambda: self._snapshot,
            registered=lambda: self.registered,
            notifier=self._notifier,
            balance=self._balance,
        )
        try:
            await session.open(self._connect_timeout)
            with _zookeeper_errors("starting the cluster registry"):
                await self._bootstrap(session)
                await self._register(session)
                self._synced_connection = session.connection_count
                await self._refresh(session, set(), full=True)
            self._publish()
            logger.info("broker %d registered at %s", self._broker.id, self._hosts)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._refresher, session)
                nursery.start_soon(self._controller.run)
                task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await self._shutdown(session)
            self._stopped = True
            self._notifier.notify()

    async def _bootstrap(self, session: ZkSession) -> None:
        for path in zk_paths.PERSISTENT_PATHS:
            await session.ensure_path(path)
        node = await session.get_or_none(zk_paths.CLUSTER_ID)
        if node is None:
            # Another broker may create it first: theirs is the id then.
            with contextlib.suppress(NodeExistsError):
                await session.create(zk_paths.CLUSTER_ID, encode_cluster_id(new_uuid()))
            node = await session.get(zk_paths.CLUSTER_ID)
        self._cluster_id = decode_cluster_id(node[0])

    async def _register(self, session: ZkSession) -> None:
        path = zk_paths.broker(self._broker.id)
        session_id = session.session_id
        waited_for: set[int] = set()
        for _ in range(5):
            try:
                await session.create(path, encode_broker(self._broker), ephemeral=True)
            except NodeExistsError:
                node = await session.get_or_none(path)
                if node is None:
                    continue
                owner = int(node[1].ephemeralOwner)
                if owner == session_id:
                    break  # our create went through before a connection blip hid its reply
                if owner in session.past_session_ids:
                    # Left by our own expired session and not reaped yet: it is ours to remove.
                    with contextlib.suppress(NoNodeError, BadVersionError):
                        await session.delete(path, version=node[1].version)
                    continue
                if owner not in waited_for:
                    # Most likely this broker's previous life, killed without deregistering: its
                    # session expires within the session timeout and ZooKeeper removes the node.
                    waited_for.add(owner)
                    logger.warning(
                        "broker id %d is still registered by ZooKeeper session 0x%x (a previous run "
                        "that did not shut down?): waiting up to %g s for that session to expire",
                        self._broker.id, owner, self._session_timeout + REGISTRATION_WAIT_MARGIN,
                    )  # fmt: skip
                    with trio.move_on_after(self._session_timeout + REGISTRATION_WAIT_MARGIN):
                        await self._wait_until_absent(session, path)
                    continue
                raise BrokerIdInUseError(
                    f"broker id {self._broker.id} is already registered at {path} by live ZooKeeper session "
                    f"0x{owner:x}: another broker runs with this id (or a crashed one's session has not "
                    f"expired yet, which takes up to its session timeout)"
                ) from None
            else:
                break
        else:
            raise ClusterError(f"could not register broker {self._broker.id}: {path} kept changing")
        self._registered_session = session_id
        logger.debug("broker %d registered in session 0x%x", self._broker.id, session_id or 0)

    async def _shutdown(self, session: ZkSession) -> None:
        try:
            with trio.move_on_after(self._shutdown_timeout):
                if self.registered and session.connected:
                    ops: list[Op] = [Delete(zk_paths.broker(self._broker.id))]
                    controller = await session.get_or_none(zk_paths.CONTROLLER)
                    if controller is not None and controller[1].ephemeralOwner == session.session_id:
                        ops.append(Delete(zk_paths.CONTROLLER, controller[1].version))
                    # One transaction, so the next controller sees this broker and its
                    # controllership end together.
                    await session.commit(ops)
        except _SHUTDOWN_ERRORS as exc:
            # Closing the session below removes the ephemeral nodes anyway.
            logger.info("broker %d could not deregister explicitly: %s", self._broker.id, exc)
        finally:
            self._registered_session = None
            await session.close()
            logger.info("broker %d left the cluster", self._broker.id)

    # ---- keeping the snapshot current

    def _mark_dirty(self, path: str) -> None:
        self._dirty.add(path)
        self._notifier.notify()

    def _has_work(self, session: ZkSession) -> bool:
        return (
            bool(self._dirty)
            or self._synced_connection != session.connection_count
            or self._registered_session != session.session_id
        )

    async def _refresher(self, session: ZkSession) -> None:
        while True:
            await self._notifier.wait_until(lambda: session.connected and self._has_work(session))
            state_version = session.state_version
            connection = session.connection_count
            # Every reconnection re-reads everything: kazoo forgot the watches when it disconnected,
            # and changes made meanwhile fired nothing.
            full = self._synced_connection != connection
            dirty, self._dirty = self._dirty, set()
            try:
                if self._registered_session != session.session_id:
                    await self._register(session)
                await self._refresh(session, dirty, full=full)
            except CONNECTION_ERRORS as exc:
                logger.debug("refresh interrupted by %s; retrying after reconnection", type(exc).__name__)
                self._dirty |= dirty
                await session.wait_state_change(state_version)
                continue
            if full:
                self._synced_connection = connection
            self._publish()

    async def _refresh(self, session: ZkSession, paths: set[str], *, full: bool) -> None:
        broker_ids: set[int] = set()
        topic_names: set[str] = set()
        for path in paths:
            if (child := zk_paths.child_of(path, zk_paths.BROKER_IDS)) is not None:
                if child.isdigit():
                    broker_ids.add(int(child))
            elif (name := zk_paths.child_of(path, zk_paths.BROKER_TOPICS)) is not None or (
                name := zk_paths.child_of(path, zk_paths.CONFIG_TOPICS)
            ) is not None:
                topic_names.add(name)

        if full or zk_paths.BROKER_IDS in paths:
            children = await self._children_ensured(session, zk_paths.BROKER_IDS)
            listed = {int(c) for c in children if c.isdigit()}
            for gone in self._brokers.keys() - listed:
                del self._brokers[gone]
            broker_ids |= listed if full else listed - self._brokers.keys()
        await self._read_brokers(session, sorted(broker_ids))

        if full or zk_paths.BROKER_TOPICS in paths:
            listed_topics = set(await self._children_ensured(session, zk_paths.BROKER_TOPICS))
            for gone_topic in self._topics.keys() - listed_topics:
                del self._topics[gone_topic]
            topic_names |= listed_topics if full else listed_topics - self._topics.keys()
        await self._read_topics(session, sorted(topic_names))

        if full or zk_paths.CONTROLLER in paths:
            await self._read_controller(session)

    async def _children_ensured(self, session: ZkSession, path: str) -> list[str]:
        # Someone may have removed a persistent path by hand; recreate it rather than stop watching.
        while True:
            try:
                return await session.children(path, watch=self._watch)
            except NoNodeError:
                await session.ensure_path(path)

    async def _read_brokers(self, session: ZkSession, broker_ids: list[int]) -> None:
        nodes = await session.get_many([zk_paths.broker(i) for i in broker_ids], watch=self._watch)
        for broker_id, node in zip(broker_ids, nodes, strict=True):
            if node is None:
                self._brokers.pop(broker_id, None)
                continue
            try:
                self._brokers[broker_id] = dataclasses.replace(
                    decode_broker(broker_id, node[0]), epoch=int(node[1].czxid)
                )
            except ValueError as exc:
                logger.warning("ignoring malformed registration of broker %d: %s", broker_id, exc)
                self._brokers.pop(broker_id, None)

    async def _read_topics(self, session: ZkSession, names: list[str]) -> None:
        watch = self._watch
        nodes = await session.get_many([zk_paths.topic(name) for name in names], watch=watch)
        assignments: dict[str, tuple[str, dict[int, tuple[int, ...]]]] = {}
        moving: dict[str, dict[int, Moving]] = {}
        for name, node in zip(names, nodes, strict=True):
            if node is None:
                self._topics.pop(name, None)
                continue
            try:
                assignments[name] = decode_topic(node[0])
                moving[name] = decode_moving(node[0])
            except ValueError as exc:
                logger.warning("ignoring malformed topic %r: %s", name, exc)
                self._topics.pop(name, None)
        state_paths = [
            zk_paths.partition_state(name, index)
            for name, (_, assignment) in assignments.items()
            for index in sorted(assignment)
        ]
        config_paths = [zk_paths.topic_config(name) for name in assignments]
        # States and configs of all the topics in one round trip.
        fetched = await session.get_many(state_paths + config_paths, watch=watch)
        states = dict(zip(state_paths, fetched[: len(state_paths)], strict=True))
        configs = dict(zip(config_paths, fetched[len(state_paths) :], strict=True))
        for name, (topic_id, assignment) in assignments.items():
            partitions: dict[int, PartitionState] = {}
            for index in sorted(assignment):
                replicas = assignment[index]
                path = zk_paths.partition_state(name, index)
                node = states[path]
                if node is None:
                    # Written by a foreign tool without a state yet: offline until one appears.
                    await session.exists(path, watch=watch)
                    partitions[index] = PartitionState(NO_LEADER, 0, replicas, ())
                    continue
                try:
                    state = decode_partition_state(node[0])
                except ValueError as exc:
                    logger.warning("treating malformed state %s as offline: %s", path, exc)
                    partitions[index] = PartitionState(NO_LEADER, 0, replicas, ())
                    continue
                adding, removing = moving[name].get(index, ((), ()))
                partitions[index] = PartitionState(
                    state.leader, state.leader_epoch, replicas, state.isr, zxid=int(node[1].mzxid),
                    adding=adding, removing=removing,
                )  # fmt: skip
            config: dict[str, str] = {}
            config_node = configs[zk_paths.topic_config(name)]
            if config_node is not None:
                try:
                    config = decode_config(config_node[0])
                except ValueError as exc:
                    logger.warning("ignoring malformed config of topic %r: %s", name, exc)
            self._topics[name] = TopicInfo(name, partitions, config, topic_id)

    async def _read_controller(self, session: ZkSession) -> None:
        watch = self._watch
        while True:
            node = await session.get_or_none(zk_paths.CONTROLLER, watch=watch)
            if node is None:
                # exists() leaves a watch even on a missing node, so we hear of the next election.
                if await session.exists(zk_paths.CONTROLLER, watch=watch) is not None:
                    continue
                self._controller_id = None
                return
            try:
                self._controller_id = decode_controller(node[0])
            except ValueError as exc:
                logger.warning("ignoring malformed /controller: %s", exc)
                self._controller_id = None
            return

    def _publish(self) -> None:
        current = self._snapshot
        snapshot = ClusterSnapshot(
            brokers=dict(self._brokers),
            topics=dict(self._topics),
            controller_id=self._controller_id,
            cluster_id=self._cluster_id,
            version=current.version,
        )
        if snapshot == current:
            return
        self._snapshot = ClusterSnapshot(
            brokers=snapshot.brokers,
            topics=snapshot.topics,
            controller_id=snapshot.controller_id,
            cluster_id=snapshot.cluster_id,
            version=current.version + 1,
        )
        self._notifier.notify()

    # ---- waiting for changes

    async def wait_for(self, predicate: Callable[[ClusterSnapshot], bool], timeout: float = 10.0) -> ClusterSnapshot:
        """Wait until `predicate(snapshot)` holds, and return that snapshot.

        The predicate is re-evaluated on every change of the snapshot or of the connection, so it
        may also look at the registry's own state (`registered`, `connected`, `is_controller`).
        Raises TimeoutError after `timeout` seconds.
        """
        with trio.move_on_after(timeout):
            await self._notifier.wait_until(lambda: predicate(self._snapshot))
            return self._snapshot
        raise TimeoutError(f"broker {self._broker.id}: the cluster did not reach the condition within {timeout:g} s")

    def snapshots(self) -> SnapshotFeed:
        """`async for snapshot in registry.snapshots()`: the current snapshot, then each newer one.

        Snapshots published while the consumer was busy are skipped (it always gets the latest).
        The iteration ends when the registry stops.
        """
        return SnapshotFeed(self)

    def assignment_changes(self) -> AssignmentFeed:
        """`async for change in registry.assignment_changes()`: replicas this broker gained or lost.

        The first change lists every replica assigned now (so a broker syncs its local logs at
        start-up, after `nursery.start(registry.run)`); later ones only differences, each computed
        against the previous one, so nothing is lost when intermediate snapshots are skipped. A
        change of the config of a topic with replicas here comes as a change with nothing added
        or removed, so the broker applies it.
        The iteration ends when the registry stops.
        """
        return AssignmentFeed(self)

    # ---- operations

    def _require_session(self) -> ZkSession:
        session = self._session
        if session is None or not self.running:
            raise RegistryNotRunningError("the cluster registry is not running")
        return session

    async def create_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str] | None = None,
        *,
        replication_factor: int = 1,
        timeout: float = 30.0,
        assignment: Mapping[int, tuple[int, ...]] | None = None,
    ) -> TopicInfo:
        """Ask the controller to create a topic and wait until it is in this broker's snapshot.

        The name is not validated here (the CreateTopics handler does that). Raises
        TopicExistsError, InvalidPartitionsError, InvalidReplicationFactorError,
        TopicCreationRejectedError (the controller found the request invalid), or
        ControllerUnavailableError on timeout: the request then stays queued, and a later
        controller creates the topic (as Kafka does after REQUEST_TIMED_OUT).
        """
        session = self._require_session()
        snapshot = self._snapshot
        if partitions < 1:
            raise InvalidPartitionsError(f"topic {name!r}: partition count must be at least 1, not {partitions}")
        if assignment is not None:
            unknown = sorted({b for r in assignment.values() for b in r} - set(snapshot.brokers))
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"topic {name!r}: the replica assignment names brokers that are not alive: {unknown}"
                )
        elif not 1 <= replication_factor <= len(snapshot.brokers):
            raise InvalidReplicationFactorError(
                f"topic {name!r}: replication factor {replication_factor} with {len(snapshot.brokers)} live brokers"
            )
        if name in snapshot.topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        request = CreateTopicRequest(
            new_uuid(), partitions, replication_factor, dict(config or {}), self.broker_id, assignment
        )
        request_path = zk_paths.create_request(name)
        with trio.move_on_after(timeout), _zookeeper_errors(f"creating topic {name!r}"):
            if await session.exists(zk_paths.topic(name)) is not None:
                raise TopicExistsError(f"topic {name!r} already exists")
            try:
                await session.create(request_path, encode_create_request(request))
            except NodeExistsError:
                raise TopicExistsError(f"topic {name!r} is already being created") from None
            # The controller creates the topic and removes the request in one transaction.
            await self._wait_until_absent(session, request_path)
            node = await session.get_or_none(zk_paths.topic(name))
            if node is None:
                raise TopicCreationRejectedError(f"the controller rejected topic {name!r} (see its log)")
            if decode_topic(node[0])[0] != request.topic_id:
                raise TopicExistsError(f"topic {name!r} was created concurrently by another request")
            await self._notifier.wait_until(lambda: self._has_topic(name, request.topic_id))
            return self._snapshot.topics[name]
        raise ControllerUnavailableError(
            f"no controller created topic {name!r} within {timeout:g} s; the request stays queued"
        )

    def _has_topic(self, name: str, topic_id: str) -> bool:
        info = self._snapshot.topics.get(name)
        return info is not None and info.topic_id == topic_id

    async def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        """Ask the controller to delete a topic and wait until it left this broker's snapshot.

        Raises UnknownTopicError, or ControllerUnavailableError on timeout: the topic then stays
        marked for deletion, and a later controller deletes it.
        """
        session = self._require_session()
        request_path = zk_paths.delete_request(name)
        with trio.move_on_after(timeout), _zookeeper_errors(f"deleting topic {name!r}"):
            node = await session.get_or_none(zk_paths.topic(name))
            if node is None:
                raise UnknownTopicError(f"topic {name!r} does not exist")
            try:
                topic_id = decode_topic(node[0])[0]
            except ValueError:
                topic_id = ""
            with contextlib.suppress(NodeExistsError):  # already marked for deletion
                await session.create(request_path)
            await self._wait_until_absent(session, request_path)
            await self._notifier.wait_until(lambda: not self._has_topic(name, topic_id))
            return
        raise ControllerUnavailableError(
            f"no controller deleted topic {name!r} within {timeout:g} s; it stays marked for deletion"
        )

    async def create_partitions(
        self,
        name: str,
        count: int,
        *,
        timeout: float = 30.0,
        assignment: Mapping[int, tuple[int, ...]] | None = None,
    ) -> TopicInfo:
        """Ask the controller to grow a topic to `count` partitions (placed as `assignment` says,
        new partition -> replicas, when given); wait until this broker's snapshot shows them.

        Raises UnknownTopicError, InvalidPartitionsError (`count` is not larger than now),
        TopicCreationRejectedError (the controller refused: the topic changed meanwhile, or too
        few brokers), or ControllerUnavailableError on timeout (the request stays queued).
        """
        session = self._require_session()
        request_path = zk_paths.create_partitions_request(name)
        with trio.move_on_after(timeout), _zookeeper_errors(f"adding partitions to topic {name!r}"):
            # ZooKeeper, not the snapshot: this broker may not have heard of a new topic yet.
            node = await session.get_or_none(zk_paths.topic(name))
            if node is None:
                raise UnknownTopicError(f"topic {name!r} does not exist")
            topic_id, current = decode_topic(node[0])
            if count <= len(current):
                raise InvalidPartitionsError(
                    f"topic {name!r} has {len(current)} partitions: the new count must be larger, not {count}"
                )
            request = CreatePartitionsRequest(topic_id, count, self.broker_id, assignment)
            try:
                await session.create(request_path, encode_create_partitions_request(request))
            except NodeExistsError:
                raise InvalidPartitionsError(f"partitions are already being added to topic {name!r}") from None
            await self._wait_until_absent(session, request_path)
            node = await session.get_or_none(zk_paths.topic(name))
            if node is None or decode_topic(node[0])[0] != topic_id:
                raise UnknownTopicError(f"topic {name!r} was deleted while partitions were being added")
            if len(decode_topic(node[0])[1]) < count:
                raise TopicCreationRejectedError(f"the controller did not grow topic {name!r} (see its log)")

            def grown() -> bool:
                now = self._snapshot.topics.get(name)
                return now is not None and (now.topic_id != topic_id or len(now.partitions) >= count)

            await self._notifier.wait_until(grown)
            return self._snapshot.topics[name]
        raise ControllerUnavailableError(
            f"no controller added partitions to topic {name!r} within {timeout:g} s; the request stays queued"
        )

    async def alter_topic_config(
        self,
        name: str,
        change: Callable[[Mapping[str, str]], Mapping[str, str]],
        *,
        timeout: float = 30.0,
    ) -> Mapping[str, str]:
        """Replace a topic's config (`/config/topics/<name>`, as Kafka stores it) with
        `change(current)`, and return what was written once this broker's snapshot shows it.

        A compare-and-set on the node's version, retried when another writer got there first, so
        concurrent incremental changes never lose each other's keys. Every broker watches the
        node and applies the new config to its logs. Raises UnknownTopicError, or
        ZooKeeperUnavailableError when nothing could be written within `timeout`.
        """
        session = self._require_session()
        path = zk_paths.topic_config(name)
        deadline = trio.current_time() + timeout
        written: tuple[str, dict[str, str]] | None = None
        with trio.move_on_at(deadline), _zookeeper_errors(f"changing the config of topic {name!r}"):
            while written is None:
                topic = await session.get_or_none(zk_paths.topic(name))
                if topic is None:
                    raise UnknownTopicError(f"topic {name!r} does not exist")
                node = await session.get_or_none(path)
                current = decode_config(node[0]) if node is not None else {}
                wanted = dict(change(current))
                try:
                    if node is None:
                        await session.create(path, encode_config(wanted))
                    elif wanted != current:
                        await session.set(path, encode_config(wanted), version=node[1].version)
                except (NodeExistsError, BadVersionError):
                    continue
                written = decode_topic(topic[0])[0], wanted
        if written is None:
            raise ZooKeeperUnavailableError(f"could not change the config of topic {name!r} within {timeout:g} s")
        topic_id, wanted = written

        def applied() -> bool:
            # Ours, or a later writer's that kept our change (its re-application changes nothing).
            now = self._snapshot.topics.get(name)
            if now is None or now.topic_id != topic_id:
                return True
            return dict(now.config) == wanted or dict(change(now.config)) == dict(now.config)

        # The write stands either way; the wait only lets the caller's next read see it here.
        with trio.move_on_at(deadline):
            await self._notifier.wait_until(applied)
        return wanted

    async def _wait_until_absent(self, session: ZkSession, path: str) -> None:
        while not await self._absent_or_changed(session, path):
            pass

    async def _absent_or_changed(self, session: ZkSession, path: str) -> bool:
        """True when `path` is gone; False after it (or the connection) changed, to look again."""
        fired = trio.Event()

        def on_change(_path: str) -> None:
            fired.set()
            self._notifier.notify()  # the waiter below sleeps on the notifier, not on `fired`

        # A watcher of its own (not the registry's), so that it fires for this wait only.
        watch = session.watcher(on_change)
        state_version = session.state_version
        try:
            if await session.exists(path, watch=watch) is None:
                return True
        except CONNECTION_ERRORS:
            await session.wait_state_change(state_version)
            return False
        # A reconnection drops kazoo's watchers, so a state change also means "look again".
        await self._notifier.wait_until(lambda: fired.is_set() or session.state_version != state_version)
        return False

    async def controlled_shutdown(self, timeout: float) -> bool:
        """Hand this broker's leaderships to other in-sync replicas before it stops.

        Announces the shutdown (an ephemeral `/admin/controlled_shutdown/<id>`, gone with the
        session) and waits until the controller marks it done (the node's data becomes
        CONTROLLED_SHUTDOWN_DONE): every leadership another in-sync replica that is not shutting
        down too could take has moved. True when that happened within `timeout`.
        """
        session = self._require_session()
        path = zk_paths.controlled_shutdown(self.broker_id)
        if not session.connected:
            # No controller can move anything without ZooKeeper: waiting would only delay the stop.
            logger.warning("controlled shutdown skipped: ZooKeeper is not connected")
            return False
        with trio.move_on_after(timeout):
            try:
                with _zookeeper_errors("a controlled shutdown"):
                    await session.ensure_path(zk_paths.ADMIN_CONTROLLED_SHUTDOWN)
                    with contextlib.suppress(NodeExistsError):
                        await session.create(path, b"", ephemeral=True)
                    while True:
                        fired = trio.Event()

                        def on_change(_path: str, fired: trio.Event = fired) -> None:
                            fired.set()
                            self._notifier.notify()

                        node = await session.get_or_none(path, watch=session.watcher(on_change))
                        if node is None or node[0] == CONTROLLED_SHUTDOWN_DONE:
                            return node is not None

                        def changed(fired: trio.Event = fired) -> bool:
                            return fired.is_set() or not session.connected

                        await self._notifier.wait_until(changed)
                        if not session.connected:
                            logger.warning("controlled shutdown given up: ZooKeeper connection lost")
                            return False
            except ClusterError as exc:
                logger.warning("controlled shutdown not possible: %s", exc)
                return False
        return False

    async def elect_preferred_leaders(
        self, partitions: list[tuple[str, int]], timeout: float
    ) -> dict[tuple[str, int], LeaderAndIsr]:
        """Ask the controller to move these partitions to their preferred replicas (Kafka's
        `/admin/preferred_replica_election`), wait until it has acted, and return each
        partition's state as ZooKeeper holds it then (absent: no such partition). One election
        runs at a time: a request waits for the one before it. Raises
        ControllerUnavailableError when nothing happened within `timeout`."""
        session = self._require_session()
        path = zk_paths.ADMIN_PREFERRED_REPLICA_ELECTION
        with trio.move_on_after(timeout), _zookeeper_errors("requesting a preferred leader election"):
            while True:
                try:
                    await session.create(path, encode_preferred_election(partitions))
                    break
                except NodeExistsError:
                    await self._wait_until_absent(session, path)
            await self._wait_until_absent(session, path)
            nodes = await session.get_many([zk_paths.partition_state(t, p) for t, p in partitions])
            states: dict[tuple[str, int], LeaderAndIsr] = {}
            for key, node in zip(partitions, nodes, strict=True):
                if node is not None:
                    with contextlib.suppress(ValueError):
                        states[key] = decode_partition_state(node[0])
            return states
        raise ControllerUnavailableError(f"no controller acted on the leader election within {timeout:g} s")

    async def reassign_partitions(
        self, partitions: Mapping[tuple[str, int], Sequence[int] | None], timeout: float
    ) -> None:
        """Hand partition reassignments (a target replica list, or None to cancel) to the
        controller through Kafka's `/admin/reassign_partitions` node, and wait until it has
        started them. One request is in the node at a time: a request waits for the one before
        it. Raises ControllerUnavailableError when nothing happened within `timeout`."""
        session = self._require_session()
        path = zk_paths.ADMIN_REASSIGN_PARTITIONS
        with trio.move_on_after(timeout), _zookeeper_errors("requesting a partition reassignment"):
            while True:
                try:
                    await session.create(path, encode_reassignment(partitions))
                    break
                except NodeExistsError:
                    await self._wait_until_absent(session, path)
            await self._wait_until_absent(session, path)
            return
        raise ControllerUnavailableError(f"no controller started the reassignment within {timeout:g} s")

    async def update_isr(self, topic: str, index: int, leader_epoch: int, isr: tuple[int, ...]) -> bool:
        """Write a new ISR for a partition this broker leads in `leader_epoch`; False if refused.

        The leader's half of the partition state: a compare-and-set on the state znode's version
        that goes through only while the node still names this broker as leader in that epoch,
        so a leader the controller has replaced (new epoch) can never overwrite its successor.
        """
        session = self._require_session()
        path = zk_paths.partition_state(topic, index)
        with _zookeeper_errors(f"updating the ISR of {topic}-{index}"):
            node = await session.get_or_none(path)
            if node is None:
                return False
            current = decode_partition_state(node[0])
            if current.leader != self.broker_id or current.leader_epoch != leader_epoch:
                return False
            if current.isr == isr:
                return True
            state = LeaderAndIsr(self.broker_id, leader_epoch, isr, current.controller_epoch)
            try:
                await session.set(path, encode_partition_state(state), version=node[1].version)
            except (BadVersionError, NoNodeError):
                return False
        return True

    async def allocate_producer_id_block(self, *, timeout: float = 10.0) -> range:
        """Reserve the next 1000 producer ids for this broker, cluster-wide unique.

        Compare-and-set on `/latest_producer_id_block`, retried when another broker got there first.
        """
        session = self._require_session()
        path = zk_paths.PRODUCER_ID_BLOCK
        with trio.move_on_after(timeout), _zookeeper_errors("allocating producer ids"):
            while True:
                node = await session.get_or_none(path)
                if node is None:
                    block = range(0, PRODUCER_ID_BLOCK_SIZE)
                    try:
                        await session.create(path, encode_producer_id_block(self.broker_id, block[0], block[-1]))
                    except NodeExistsError:
                        continue
                    return block
                _, last = decode_producer_id_block(node[0])
                if last + PRODUCER_ID_BLOCK_SIZE > MAX_PRODUCER_ID:
                    raise ClusterError("producer ids are exhausted")
                block = range(last + 1, last + 1 + PRODUCER_ID_BLOCK_SIZE)
                try:
                    await session.set(
                        path, encode_producer_id_block(self.broker_id, block[0], block[-1]), version=node[1].version
                    )
                except BadVersionError:
                    continue
                return block
        raise ZooKeeperUnavailableError(f"could not allocate producer ids within {timeout:g} s")


class SnapshotFeed:
    """Async iterator over a registry's snapshots; see ClusterRegistry.snapshots()."""

    def __init__(self, registry: ClusterRegistry) -> None:
        self._registry = registry
        self._last_version: int | None = None

    def __aiter__(self) -> SnapshotFeed:
        return self

    async def __anext__(self) -> ClusterSnapshot:
        registry = self._registry
        await registry._notifier.wait_until(
            lambda: registry._stopped or registry._snapshot.version != self._last_version
        )
        if registry._stopped:
            raise StopAsyncIteration
        snapshot = registry._snapshot
        self._last_version = snapshot.version
        return snapshot


class AssignmentFeed:
    """Async iterator of AssignmentChange for one broker; see ClusterRegistry.assignment_changes()."""

    def __init__(self, registry: ClusterRegistry) -> None:
        self._snapshots = SnapshotFeed(registry)
        self._broker_id = registry.broker_id
        self._held: frozenset[ReplicaKey] | None = None
        self._configs: dict[str, Mapping[str, str]] = {}

    def __aiter__(self) -> AssignmentFeed:
        return self

    async def __anext__(self) -> AssignmentChange:
        async for snapshot in self._snapshots:
            assigned = snapshot.replicas_of(self._broker_id)
            held = self._held
            if held is not None:
                # A topic given an id (it had none) is the same topic: nothing to drop or add.
                by_partition = {(r.topic, r.partition): r for r in assigned}
                held = frozenset(by_partition.get((r.topic, r.partition), r) if not r.topic_id else r for r in held)
            self._held = assigned
            # A changed topic config is a change too (with nothing added or removed): the
            # broker applies it to the logs it holds.
            configs = {r.topic: snapshot.topics[r.topic].config for r in assigned}
            configs_changed, self._configs = configs != self._configs, configs
            if held is None:
                return AssignmentChange(added=assigned, removed=frozenset(), snapshot=snapshot)
            if assigned != held or configs_changed:
                return AssignmentChange(added=assigned - held, removed=held - assigned, snapshot=snapshot)
        raise StopAsyncIteration
