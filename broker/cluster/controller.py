"""The controller: one broker, elected through the ephemeral `/controller` node, that owns changes
to topic layout and leadership.

Election is one ZooKeeper transaction that creates `/controller` and bumps `/controller_epoch`; the
winner remembers the epoch node's version, and every write it makes later carries a check of that
version in the same transaction. A controller that lost its session or was replaced therefore
cannot overwrite its successor's decisions, even if it has not noticed yet ("fencing").

Its duties:
- topic creation requests (`/admin/create_topics/<t>`): spread partitions over the live brokers
  and write the topic, its partition states and config, and remove the request, all atomically;
- topic deletion requests (`/admin/delete_topics/<t>`): remove every node of the topic and the
  request, atomically;
- partition growth requests (`/admin/create_partitions/<t>`): spread the new partitions over the
  live brokers (or place them as the request says) and write them into the topic's assignment
  with their states, atomically;
- leadership: whenever the set of live brokers changes, a partition whose leader died goes to the
  first live replica of its ISR, or to -1 when there is none; a new live leader bumps the epoch;
- controlled shutdown: a broker announcing its shutdown (`/admin/controlled_shutdown/<id>`, an
  ephemeral node) loses the leadership of every partition another in-sync replica can take;
- partition reassignment (`/admin/reassign_partitions`): start each requested move (target and
  original replicas together, the new ones catching up), and complete it once every target
  replica is in sync (:mod:`broker.cluster.reassignment` holds the rules);
- topic ids: a topic node without one (written by Kafka before 2.8, or by a foreign tool) gets
  one, as Kafka's controller does, so that Metadata v10+ and Fetch v13+ can name every topic.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import trio
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from tributary.broker.cluster import reassignment, zk_paths
from tributary.broker.cluster.model import NO_LEADER, ClusterSnapshot, registered_since, stale_leadership
from tributary.broker.cluster.session import (
    CONNECTION_ERRORS,
    ChangeNotifier,
    Check,
    Create,
    Delete,
    Op,
    SetData,
    Stat,
    TransactionFailedError,
    ZkSession,
)
from tributary.broker.cluster.znodes import (
    CONTROLLED_SHUTDOWN_DONE,
    CreatePartitionsRequest,
    CreateTopicRequest,
    LeaderAndIsr,
    decode_controller_epoch,
    decode_create_partitions_request,
    decode_create_request,
    decode_moving,
    decode_partition_state,
    decode_preferred_election,
    decode_reassignment,
    decode_topic,
    encode_config,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic,
    new_uuid,
)

logger = logging.getLogger(__name__)

# Bounds a transaction's size well below ZooKeeper's 1 MB request limit.
MAX_OPS_PER_TRANSACTION = 500
# Backoff before retrying work that raced with another writer (not a correctness timer).
RETRY_DELAY = 0.2
ELECTION_RETRY = 1.0


def _rack_alternated(broker_ids: Collection[int], racks: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered one rack at a time (Kafka's getRackAlternatedBrokerList): the first of
    each rack, then the second of each, ..."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(broker_ids):
        by_rack.setdefault(racks.get(broker) or "", []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    ordered: list[int] = []
    for i in range(max(len(q) for q in queues)):
        ordered += [q[i] for q in queues if i < len(q)]
    return ordered


def _replica_index(first: int, shift: int, replica: int, count: int) -> int:
    """Kafka's replicaIndex: the followers of a partition step away from its leader by a shift
    that changes every time the partitions have gone round the brokers once."""
    return (first + 1 + (shift + replica) % (count - 1)) % count


def assign_replicas(  # noqa: PLR0917 (Kafka's AdminUtils.assignReplicasToBrokers, argument for argument)
    broker_ids: Collection[int],
    partitions: int,
    replication_factor: int,
    start: int,
    shift: int = 0,
    racks: Mapping[int, str | None] | None = None,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Replica lists for partitions `first_partition`..`first_partition + partitions - 1`, by
    Kafka's algorithm (AdminUtils.assignReplicasToBrokers), rack-aware when `racks` names more
    than one rack.

    The leader of partition p is broker (start + p) of the rack-alternated list, so every broker
    leads floor(P/n) or ceil(P/n) partitions; its followers are the brokers `_replica_index`
    picks, skipping one whose rack already holds a replica of the partition until every rack
    does. The shift grows each time the partitions have gone round the brokers once, so when a
    broker dies its partitions' leadership spreads over the others instead of all moving to
    the next broker. `start` and `shift` are random in the controller, fixed in tests.
    """
    racks = racks or {}
    ordered = _rack_alternated(broker_ids, racks)
    count = len(ordered)
    if not 1 <= replication_factor <= count:
        raise ValueError(f"replication factor {replication_factor} needs 1..{count} brokers")
    rack_count = len({racks.get(b) or "" for b in ordered})
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        replicas = [ordered[first]]
        used_racks = {racks.get(ordered[first]) or ""}
        k = 0
        while len(replicas) < replication_factor:
            broker = ordered[_replica_index(first, shift * rack_count, k, count)]
            rack = racks.get(broker) or ""
            if (rack not in used_racks or len(used_racks) == rack_count) and (
                broker not in replicas or len(replicas) == count
            ):
                replicas.append(broker)
                used_racks.add(rack)
            k += 1
        assignment[partition] = tuple(replicas)
    return assignment


def elect_leader(  # noqa: PLR0917 (the facts an election weighs)
    current: LeaderAndIsr,
    replicas: Sequence[int],
    live: Collection[int],
    controller_epoch: int,
    shutting_down: Collection[int] = (),
    restarted: bool = False,
    rejoined: Collection[int] = (),
) -> LeaderAndIsr | None:
    """The partition's next state given the live brokers, or None when it should not change.

    A live leader stays, unless it is shutting down and another in-sync replica can take over,
    or it `restarted` since it was made leader (its registration is newer than the state): then
    another in-sync replica takes over, or, being the only one, it leads again in a new epoch.
    Otherwise the first live replica (in replica order) that is in the ISR and not shutting down
    leads, with the epoch bumped and dead (or departing, or restarted) replicas dropped from the
    ISR. Only the ISR is ever chosen from (clean election), and the ISR never becomes empty, so
    a partition whose in-sync replicas are all gone waits at leader -1 (same epoch) for one.

    `rejoined`: replicas that registered again since the state was written. Their ISR
    membership predates a restart after which their logs may lack what they had not fsynced (a
    power cut), so a replica that kept running is chosen before them, and they leave the ISR
    when one is (KIP-966's concern). Only when no other in-sync replica is alive does one of them
    lead: nothing better is left (with high.watermark.fsync, nothing was lost either).
    """
    leader_alive = current.leader != NO_LEADER and current.leader in live
    if leader_alive and current.leader not in shutting_down and not restarted:
        return None
    gone = set(shutting_down) | ({current.leader} if restarted else set())
    candidates = [b for b in replicas if b in current.isr and b in live and b not in gone]
    if not candidates:
        if restarted and leader_alive:
            return LeaderAndIsr(current.leader, current.leader_epoch + 1, current.isr, controller_epoch)
        if leader_alive or current.leader == NO_LEADER:
            return None  # a departing leader with no one to hand over to keeps leading until it goes
        return LeaderAndIsr(NO_LEADER, current.leader_epoch, current.isr, controller_epoch)
    kept_running = [b for b in candidates if b not in rejoined]
    if kept_running:
        gone |= set(rejoined)
    leader = (kept_running or candidates)[0]
    isr = tuple(b for b in current.isr if b in live and b not in gone) or (leader,)
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr, controller_epoch)


def preferred_leader(
    current: LeaderAndIsr, replicas: Sequence[int], live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """Leadership back to the preferred replica (the first of the assignment), or None when it
    leads already or cannot: it must be alive and in the ISR (a preferred election is clean)."""
    if not replicas:
        return None
    preferred = replicas[0]
    if current.leader == preferred or preferred not in live or preferred not in current.isr:
        return None
    return LeaderAndIsr(preferred, current.leader_epoch + 1, current.isr, controller_epoch)


def imbalanced_brokers(states: Collection[tuple[tuple[int, ...], int]], threshold_percent: int) -> frozenset[int]:
    """Brokers whose share of preferred-leader partitions led by someone else exceeds the
    threshold (Kafka's leader.imbalance.per.broker.percentage), from (replicas, leader) pairs."""
    preferred: dict[int, int] = {}
    elsewhere: dict[int, int] = {}
    for replicas, leader in states:
        if not replicas:
            continue
        first = replicas[0]
        preferred[first] = preferred.get(first, 0) + 1
        if leader != first:
            elsewhere[first] = elsewhere.get(first, 0) + 1
    return frozenset(b for b, n in elsewhere.items() if n * 100 > threshold_percent * preferred[b])


@dataclass(frozen=True, slots=True)
class LeaderBalance:
    """auto.leader.rebalance.enable and its timing, Kafka's names and defaults."""

    enabled: bool = True
    check_interval_s: float = 300.0
    per_broker_percentage: int = 10


@dataclass(frozen=True, slots=True)
class ControllerEpoch:
    epoch: int
    # Version of /controller_epoch after our election: the fencing token checked by every write.
    zk_version: int


class _Fenced(Exception):
    """A newer controller exists: this one must stop writing."""


class Controller:
    """Runs in every broker; acts only while this broker holds `/controller`."""

    def __init__(
        self,
        session: ZkSession,
        *,
        broker_id: int,
        snapshot: Callable[[], ClusterSnapshot],
        registered: Callable[[], bool],
        notifier: ChangeNotifier,
        rng: random.Random | None = None,
        balance: LeaderBalance | None = None,
    ) -> None:
        self._session = session
        self._balance = balance or LeaderBalance()
        self._broker_id = broker_id
        self._snapshot = snapshot
        self._registered = registered
        self._notifier = notifier
        self._rng = rng or random.Random()
        self._admin_dirty = False
        self._admin_watch = session.watcher(self._on_admin_change)
        self.epoch: int | None = None

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def _on_admin_change(self, _path: str) -> None:
        self._admin_dirty = True
        self._notifier.notify()

    async def run(self) -> None:
        session = self._session
        while True:
            await self._notifier.wait_until(
                lambda: session.connected and self._registered() and self._snapshot().controller_id is None
            )
            generation = session.generation
            seen = self._snapshot().version
            state_version = session.state_version
            try:
                epoch = await self._elect()
            except CONNECTION_ERRORS:
                await session.wait_state_change(state_version)
                continue
            if epoch is None:

                def moved_on(seen: int = seen, generation: int = generation) -> bool:
                    return self._snapshot().version != seen or session.generation != generation

                # Someone else won: our snapshot catches up through the /controller watch.
                with trio.move_on_after(ELECTION_RETRY):
                    await self._notifier.wait_until(moved_on)
                continue
            logger.info("broker %d is the controller (epoch %d)", self._broker_id, epoch.epoch)
            self.epoch = epoch.epoch
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._step_down_when_deposed, generation, nursery.cancel_scope)
                    await self._serve(epoch)
                    nursery.cancel_scope.cancel()
            finally:
                self.epoch = None
            logger.info("broker %d is no longer the controller", self._broker_id)

    async def _elect(self) -> ControllerEpoch | None:
        session = self._session
        for _ in range(10):
            current = await session.get_or_none(zk_paths.CONTROLLER_EPOCH)
            epoch_op: Op
            if current is None:
                epoch = 1
                epoch_op = Create(zk_paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch))
            else:
                epoch = decode_controller_epoch(current[0]) + 1
                epoch_op = SetData(zk_paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch), current[1].version)
            claim = Create(zk_paths.CONTROLLER, encode_controller(self._broker_id), ephemeral=True)
            try:
                results = await session.commit([claim, epoch_op])
            except TransactionFailedError as exc:
                if exc.index == 0:
                    return None
                continue  # another candidate bumped the epoch between our read and write
            zk_version = 0 if current is None else int(results[1].version)
            return ControllerEpoch(epoch, zk_version)
        return None

    async def _step_down_when_deposed(self, generation: int, scope: trio.CancelScope) -> None:
        session = self._session
        await self._notifier.wait_until(
            lambda: session.generation != generation or self._snapshot().controller_id not in (None, self._broker_id)
        )
        scope.cancel()

    async def _serve(self, epoch: ControllerEpoch) -> None:
        session = self._session
        repair = False
        next_balance = trio.current_time() + self._balance.check_interval_s
        while True:
            seen = self._snapshot().version
            state_version = session.state_version
            connection = session.connection_count
            self._admin_dirty = False
            try:
                if repair:
                    await session.ensure_path(zk_paths.ADMIN_CREATE_TOPICS)
                    await session.ensure_path(zk_paths.ADMIN_DELETE_TOPICS)
                    await session.ensure_path(zk_paths.ADMIN_CREATE_PARTITIONS)
                    await session.ensure_path(zk_paths.ADMIN_CONTROLLED_SHUTDOWN)
                    repair = False
                deletions = await session.children(zk_paths.ADMIN_DELETE_TOPICS, watch=self._admin_watch)
                creations = await session.children(zk_paths.ADMIN_CREATE_TOPICS, watch=self._admin_watch)
                growths = await session.children(zk_paths.ADMIN_CREATE_PARTITIONS, watch=self._admin_watch)
                clean = True
                for name in sorted(deletions):
                    clean &= await self._delete_topic(epoch, name)
                for name in sorted(creations):
                    clean &= await self._create_topic(epoch, name)
                for name in sorted(growths):
                    clean &= await self._grow_topic(epoch, name)
                departing = await session.children(zk_paths.ADMIN_CONTROLLED_SHUTDOWN, watch=self._admin_watch)
                shutting_down = frozenset(int(c) for c in departing if c.isdigit())
                clean &= await self._reconcile_leaders(epoch, shutting_down)
                clean &= await self._assign_topic_ids(epoch)
                if clean and shutting_down:
                    await self._confirm_shutdowns(epoch, shutting_down)
                clean &= await self._preferred_elections(epoch)
                clean &= await self._start_reassignments(epoch)
                clean &= await self._complete_reassignments(epoch)
                if self._balance.enabled and trio.current_time() >= next_balance:
                    clean &= await self._rebalance_leaders(epoch)
                    next_balance = trio.current_time() + self._balance.check_interval_s
            except _Fenced:
                logger.warning("controller epoch %d was superseded", epoch.epoch)
                return
            except NoNodeError:
                # An /admin path was removed by hand: recreate it and look again.
                repair = True
                continue
            except CONNECTION_ERRORS:
                await session.wait_state_change(state_version)
                continue

            def changed(seen: int = seen, connection: int = connection) -> bool:
                # kazoo forgets watches on disconnection: after reconnecting, look (and watch) again.
                return self._admin_dirty or self._snapshot().version != seen or session.connection_count != connection

            wait = RETRY_DELAY if not clean else max(next_balance - trio.current_time(), 0.0)
            if clean and not self._balance.enabled:
                await self._notifier.wait_until(changed)
            else:
                with trio.move_on_after(wait):
                    await self._notifier.wait_until(changed)

    async def _commit(self, epoch: ControllerEpoch, ops: Sequence[Op]) -> None:
        try:
            await self._session.commit([Check(zk_paths.CONTROLLER_EPOCH, epoch.zk_version), *ops])
        except TransactionFailedError as exc:
            if exc.index == 0:
                raise _Fenced from exc
            raise

    async def _drop_request(self, path: str, version: int) -> None:
        with contextlib.suppress(NoNodeError, BadVersionError):
            await self._session.delete(path, version=version)

    async def _admissible_request(self, name: str) -> tuple[CreateTopicRequest, int] | None:
        """The pending creation request for `name` and its znode version, if it should be acted on.

        Requests that cannot be (malformed, topic exists, too few brokers) are removed, which tells
        the waiting requester that it was refused.
        """
        session = self._session
        request_path = zk_paths.create_request(name)
        node = await session.get_or_none(request_path)
        if node is None:
            return None
        data, stat = node
        try:
            request = decode_create_request(data)
        except ValueError as exc:
            logger.warning("dropping malformed create request for %r: %s", name, exc)
            await self._drop_request(request_path, stat.version)
            return None
        if await session.exists(zk_paths.topic(name)) is not None:
            await self._drop_request(request_path, stat.version)
            return None
        live = self._snapshot().live_broker_ids
        if request.assignment is not None and any(b not in live for r in request.assignment.values() for b in r):
            logger.warning("rejecting topic %r: its replica assignment names brokers that are not alive", name)
            await self._drop_request(request_path, stat.version)
            return None
        if request.partitions < 1 or not 1 <= request.replication_factor <= len(live):
            logger.warning(
                "rejecting topic %r: %d partitions, replication factor %d, %d live brokers",
                name,
                request.partitions,
                request.replication_factor,
                len(live),
            )
            await self._drop_request(request_path, stat.version)
            return None
        return request, int(stat.version)

    async def _create_topic(self, epoch: ControllerEpoch, name: str) -> bool:
        session = self._session
        admissible = await self._admissible_request(name)
        if admissible is None:
            return True
        request, request_version = admissible
        request_path = zk_paths.create_request(name)
        snapshot = self._snapshot()
        live = sorted(snapshot.live_broker_ids)
        assignment = (
            dict(request.assignment)
            if request.assignment is not None
            else assign_replicas(
                live,
                request.partitions,
                request.replication_factor,
                start=self._rng.randrange(len(live)),
                shift=self._rng.randrange(len(live)),
                racks={b: info.placement_rack for b, info in snapshot.brokers.items()},
            )
        )
        config_exists = await session.exists(zk_paths.topic_config(name)) is not None
        ops: list[Op] = [
            Create(zk_paths.topic(name), encode_topic(request.topic_id, assignment)),
            Create(zk_paths.partitions(name)),
        ]
        for index, replicas in assignment.items():
            state = LeaderAndIsr(leader=replicas[0], leader_epoch=0, isr=replicas, controller_epoch=epoch.epoch)
            ops.append(Create(zk_paths.partition(name, index)))
            ops.append(Create(zk_paths.partition_state(name, index), encode_partition_state(state)))
        config_path, config = zk_paths.topic_config(name), encode_config(request.config)
        # A leftover config from a topic deleted by another tool is overwritten, not an obstacle.
        ops.append(SetData(config_path, config) if config_exists else Create(config_path, config))
        # Removing the request in the same transaction makes creation happen exactly once.
        ops.append(Delete(request_path, request_version))
        try:
            await self._commit(epoch, ops)
        except TransactionFailedError as exc:
            if isinstance(exc.error, NodeExistsError) and exc.op == ops[0]:
                await self._drop_request(request_path, request_version)
                return True
            logger.info("creating topic %r raced with another writer (%s); retrying", name, exc)
            return False
        logger.info("created topic %r with %d partitions", name, len(assignment))
        return True

    async def _grow_topic(self, epoch: ControllerEpoch, name: str) -> bool:
        """Act on `/admin/create_partitions/<name>`: add partitions up to the requested count.

        The new partitions continue the round robin from a random broker, with the topic's
        replication factor; the topic node is written with its version checked, so a concurrent
        deletion or growth makes this attempt fail and run again on fresh data. A request that
        cannot be honoured (topic gone or recreated, count not larger, too few brokers) is dropped,
        which the requester reads as a refusal.
        """
        session = self._session
        request_path = zk_paths.create_partitions_request(name)
        node = await session.get_or_none(request_path)
        if node is None:
            return True
        data, stat = node
        topic = await session.get_or_none(zk_paths.topic(name))
        if topic is None:
            logger.warning("dropping partition request for %r: the topic does not exist", name)
            await self._drop_request(request_path, stat.version)
            return True
        try:
            request = decode_create_partitions_request(data)
            topic_id, assignment = decode_topic(topic[0])
            moving = decode_moving(topic[0])
        except ValueError as exc:
            logger.warning("dropping partition request for %r: %s", name, exc)
            await self._drop_request(request_path, stat.version)
            return True
        replication_factor = max((len(r) for r in assignment.values()), default=1)
        current = len(assignment)
        added = None
        if request.topic_id in ("", topic_id) and request.partitions > current:
            added = self._new_replicas(request, current, replication_factor)
        if added is None:
            logger.warning(
                "rejecting growth of topic %r from %d to %d partitions (%d live brokers%s)",
                name,
                current,
                request.partitions,
                len(self._snapshot().live_broker_ids),
                "" if request.assignment is None else f", assignment {dict(request.assignment)}",
            )
            await self._drop_request(request_path, stat.version)
            return True
        ops: list[Op] = [
            SetData(zk_paths.topic(name), encode_topic(topic_id, {**assignment, **added}, moving), topic[1].version)
        ]
        for index, replicas in sorted(added.items()):
            state = LeaderAndIsr(leader=replicas[0], leader_epoch=0, isr=replicas, controller_epoch=epoch.epoch)
            ops.append(Create(zk_paths.partition(name, index)))
            ops.append(Create(zk_paths.partition_state(name, index), encode_partition_state(state)))
        ops.append(Delete(request_path, stat.version))
        try:
            await self._commit(epoch, ops)
        except TransactionFailedError as exc:
            logger.info("growing topic %r raced with another writer (%s); retrying", name, exc)
            return False
        logger.info("grew topic %r from %d to %d partitions", name, current, request.partitions)
        return True

    def _new_replicas(
        self, request: CreatePartitionsRequest, current: int, replication_factor: int
    ) -> dict[int, tuple[int, ...]] | None:
        """Replicas of the partitions `current`.. a growth request adds: the request's own (each
        new partition once, live brokers only), else spread over the live brokers with the
        topic's replication factor; None when that cannot be."""
        snapshot = self._snapshot()
        live = sorted(snapshot.live_broker_ids)
        if request.assignment is not None:
            chosen = dict(request.assignment)
            fits = sorted(chosen) == list(range(current, request.partitions))
            return chosen if fits and all(b in live for r in chosen.values() for b in r) else None
        if replication_factor > len(live):
            return None
        return assign_replicas(
            live,
            request.partitions - current,
            replication_factor,
            start=self._rng.randrange(len(live)),
            shift=self._rng.randrange(len(live)),
            racks={b: info.placement_rack for b, info in snapshot.brokers.items()},
            first_partition=current,
        )

    async def _delete_topic(self, epoch: ControllerEpoch, name: str) -> bool:
        session = self._session
        request_path = zk_paths.delete_request(name)
        request = await session.get_or_none(request_path)
        if request is None:
            return True
        topic = await session.get_or_none(zk_paths.topic(name))
        if topic is None:
            await self._drop_request(request_path, request[1].version)
            return True
        try:
            indexes = await session.children(zk_paths.partitions(name))
            partitions_exist = True
        except NoNodeError:
            indexes, partitions_exist = [], False
        state_paths = [f"{zk_paths.partitions(name)}/{index}/state" for index in indexes]
        states = await session.exists_many(state_paths)
        ops: list[Op] = []
        for index, state_path, state in zip(indexes, state_paths, states, strict=True):
            if state is not None:
                ops.append(Delete(state_path))
            ops.append(Delete(f"{zk_paths.partitions(name)}/{index}"))
        if partitions_exist:
            ops.append(Delete(zk_paths.partitions(name)))
        ops.append(Delete(zk_paths.topic(name), topic[1].version))
        if await session.exists(zk_paths.topic_config(name)) is not None:
            ops.append(Delete(zk_paths.topic_config(name)))
        ops.append(Delete(request_path, request[1].version))
        try:
            await self._commit(epoch, ops)
        except TransactionFailedError as exc:
            logger.info("deleting topic %r raced with another writer (%s); retrying", name, exc)
            return False
        logger.info("deleted topic %r", name)
        return True

    async def _assign_topic_ids(self, epoch: ControllerEpoch) -> bool:
        """Give every topic node that has no topic id a new one, version-checked against the
        node as read (a concurrent change makes this run again on fresh data)."""
        missing = [name for name, info in self._snapshot().topics.items() if not info.topic_id]
        clean = True
        for name in sorted(missing):
            node = await self._session.get_or_none(zk_paths.topic(name))
            if node is None:
                continue
            try:
                topic_id, assignment = decode_topic(node[0])
                moving = decode_moving(node[0])
            except ValueError:
                continue  # the registry ignores it too, and says so
            if topic_id:
                continue
            topic_id = new_uuid()
            try:
                await self._commit(epoch, [SetData(zk_paths.topic(name), encode_topic(topic_id, assignment, moving),
                                                   node[1].version)])  # fmt: skip
            except TransactionFailedError as exc:
                logger.info("giving topic %r an id raced with another writer (%s); retrying", name, exc)
                clean = False
                continue
            logger.info("topic %r had no topic id: it is %s now", name, topic_id)
        return clean

    async def _reconcile_leaders(self, epoch: ControllerEpoch, shutting_down: frozenset[int]) -> bool:
        snapshot = self._snapshot()
        live = snapshot.live_broker_ids
        suspects: list[tuple[str, tuple[int, ...]]] = []
        for topic in snapshot.topics.values():
            for index, state in sorted(topic.partitions.items()):
                seen = LeaderAndIsr(state.leader, state.leader_epoch, state.isr, epoch.epoch)
                restarted = stale_leadership(state, snapshot.brokers)
                rejoined = registered_since(state.zxid, state.isr, snapshot.brokers)
                decided = elect_leader(seen, state.replicas, live, epoch.epoch, shutting_down, restarted, rejoined)
                if decided is not None:
                    suspects.append((zk_paths.partition_state(topic.name, index), state.replicas))
        if not suspects:
            return True
        # Decide on the nodes' current contents, not on the (possibly older) snapshot.
        nodes = await self._session.get_many([path for path, _ in suspects])
        ops: list[Op] = []
        for (path, replicas), node in zip(suspects, nodes, strict=True):
            if node is None:
                continue  # the topic is being deleted
            try:
                current = decode_partition_state(node[0])
            except ValueError as exc:
                logger.warning("ignoring malformed partition state %s: %s", path, exc)
                continue
            leader = snapshot.brokers.get(current.leader)
            restarted = leader is not None and leader.epoch > int(node[1].mzxid)
            rejoined = registered_since(int(node[1].mzxid), current.isr, snapshot.brokers)
            decided = elect_leader(current, replicas, live, epoch.epoch, shutting_down, restarted, rejoined)
            if decided is not None:
                ops.append(SetData(path, encode_partition_state(decided), node[1].version))
        clean = True
        for start in range(0, len(ops), MAX_OPS_PER_TRANSACTION):
            try:
                await self._commit(epoch, ops[start : start + MAX_OPS_PER_TRANSACTION])
            except TransactionFailedError as exc:
                logger.info("leader update raced with another writer (%s); retrying", exc)
                clean = False
        if ops:
            logger.info("updated leadership of %d partitions (live brokers %s)", len(ops), sorted(live))
        return clean

    async def _confirm_shutdowns(self, epoch: ControllerEpoch, shutting_down: frozenset[int]) -> None:
        """Tell each departing broker that has nothing left to hand over (as far as the snapshot
        shows) that it may go: it waits for that word in its controlled-shutdown node."""
        snapshot = self._snapshot()
        live = snapshot.live_broker_ids
        busy = set()
        for topic in snapshot.topics.values():
            for state in topic.partitions.values():
                if state.leader in shutting_down:
                    seen = LeaderAndIsr(state.leader, state.leader_epoch, state.isr, epoch.epoch)
                    if elect_leader(seen, state.replicas, live, epoch.epoch, shutting_down) is not None:
                        busy.add(state.leader)
        for broker in sorted(shutting_down - busy):
            path = zk_paths.controlled_shutdown(broker)
            node = await self._session.get_or_none(path)
            if node is not None and node[0] != CONTROLLED_SHUTDOWN_DONE:
                with contextlib.suppress(NoNodeError, BadVersionError):
                    await self._session.set(path, CONTROLLED_SHUTDOWN_DONE, version=node[1].version)
                logger.info("broker %d may shut down: its leaderships have moved", broker)

    async def _elect_preferred(self, epoch: ControllerEpoch, partitions: Collection[tuple[str, int]]) -> bool:
        """Move each partition's leadership to its preferred replica where that is possible."""
        snapshot = self._snapshot()
        live = snapshot.live_broker_ids
        chosen: list[tuple[str, tuple[int, ...]]] = []
        for topic, index in sorted(partitions):
            state = snapshot.partition(topic, index)
            if state is None:
                continue
            seen = LeaderAndIsr(state.leader, state.leader_epoch, state.isr, epoch.epoch)
            if preferred_leader(seen, state.replicas, live, epoch.epoch) is not None:
                chosen.append((zk_paths.partition_state(topic, index), state.replicas))
        if not chosen:
            return True
        nodes = await self._session.get_many([path for path, _ in chosen])
        ops: list[Op] = []
        for (path, replicas), node in zip(chosen, nodes, strict=True):
            if node is None:
                continue
            try:
                current = decode_partition_state(node[0])
            except ValueError:
                continue
            decided = preferred_leader(current, replicas, live, epoch.epoch)
            if decided is not None:
                ops.append(SetData(path, encode_partition_state(decided), node[1].version))
        clean = True
        for start in range(0, len(ops), MAX_OPS_PER_TRANSACTION):
            try:
                await self._commit(epoch, ops[start : start + MAX_OPS_PER_TRANSACTION])
            except TransactionFailedError as exc:
                logger.info("preferred leader election raced with another writer (%s); retrying", exc)
                clean = False
        if ops:
            logger.info("moved %d partitions back to their preferred leader", len(ops))
        return clean

    async def _admin_request(self, path: str) -> tuple[bytes, Stat] | None:
        """The request waiting in the ``/admin`` node ``path``, which is left watched either way.

        get() leaves no watch on a node that is not there, so a missing one is watched with
        exists(); a request created between the two calls is read then. (Returning "nothing to
        do" there left it unanswered: its node's watch fires only when the node changes again,
        and ElectLeaders waited out its timeout.)"""
        session = self._session
        while True:
            node = await session.get_or_none(path, watch=self._admin_watch)
            if node is not None or await session.exists(path, watch=self._admin_watch) is None:
                return node

    async def _preferred_elections(self, epoch: ControllerEpoch) -> bool:
        """Act on `/admin/preferred_replica_election` (ElectLeaders, kafka-leader-election)."""
        node = await self._admin_request(zk_paths.ADMIN_PREFERRED_REPLICA_ELECTION)
        if node is None:
            return True
        data, stat = node
        try:
            partitions = decode_preferred_election(data)
        except ValueError as exc:
            logger.warning("dropping malformed preferred replica election request: %s", exc)
            partitions = []
        clean = await self._elect_preferred(epoch, partitions)
        if clean:
            await self._drop_request(zk_paths.ADMIN_PREFERRED_REPLICA_ELECTION, stat.version)
        return clean

    async def _rebalance_leaders(self, epoch: ControllerEpoch) -> bool:
        """auto.leader.rebalance.enable: give brokers over the imbalance threshold their
        preferred leaderships back."""
        snapshot = self._snapshot()
        pairs = [
            (state.replicas, state.leader) for topic in snapshot.topics.values() for state in topic.partitions.values()
        ]
        brokers = imbalanced_brokers(pairs, self._balance.per_broker_percentage)
        if not brokers:
            return True
        partitions = [
            (topic.name, index)
            for topic in snapshot.topics.values()
            for index, state in topic.partitions.items()
            if state.replicas and state.replicas[0] in brokers and state.leader != state.replicas[0]
        ]
        return await self._elect_preferred(epoch, partitions)

    # --- partition reassignment -------------------------------------------------------------

    async def _start_reassignments(self, epoch: ControllerEpoch) -> bool:
        """Act on `/admin/reassign_partitions`: start (or replace, or cancel) each move."""
        node = await self._admin_request(zk_paths.ADMIN_REASSIGN_PARTITIONS)
        if node is None:
            return True
        data, stat = node
        try:
            requested = decode_reassignment(data)
        except ValueError as exc:
            logger.warning("dropping malformed partition reassignment request: %s", exc)
            requested = {}
        by_topic: dict[str, dict[int, tuple[int, ...] | None]] = {}
        for (topic, index), target in requested.items():
            by_topic.setdefault(topic, {})[index] = target
        live = self._snapshot().live_broker_ids
        for topic, targets in sorted(by_topic.items()):
            if not await self._move(epoch, topic, targets, live):
                return False
        await self._drop_request(zk_paths.ADMIN_REASSIGN_PARTITIONS, stat.version)
        return True

    async def _complete_reassignments(self, epoch: ControllerEpoch) -> bool:
        """Finish every move whose target replicas are all in sync now."""
        snapshot = self._snapshot()
        clean = True
        for topic in snapshot.topics.values():
            ready = {
                index: None
                for index, state in topic.partitions.items()
                if reassignment.completed(
                    reassignment.Assignment(state.replicas, state.adding, state.removing), state.isr
                )
            }
            if ready:
                clean &= await self._move(epoch, topic.name, ready, snapshot.live_broker_ids, complete=True)
        return clean

    async def _move(
        self,
        epoch: ControllerEpoch,
        topic: str,
        targets: Mapping[int, tuple[int, ...] | None],
        live: Collection[int],
        *,
        complete: bool = False,
    ) -> bool:
        """Start (target given), cancel (None) or, with ``complete``, finish the reassignments of
        some partitions of one topic, deciding on the nodes' current contents: the topic node
        and the partition states are written together, each with its version checked."""
        session = self._session
        topic_node = await session.get_or_none(zk_paths.topic(topic))
        if topic_node is None:
            logger.warning("partition reassignment of %r dropped: the topic does not exist", topic)
            return True
        try:
            topic_id, assignment = decode_topic(topic_node[0])
            moving = decode_moving(topic_node[0])
        except ValueError as exc:
            logger.warning("partition reassignment of %r dropped: %s", topic, exc)
            return True
        indexes = sorted(i for i in targets if i in assignment)
        state_nodes = await session.get_many([zk_paths.partition_state(topic, i) for i in indexes])
        ops: list[Op] = []
        for index, state_node in zip(indexes, state_nodes, strict=True):
            adding, removing = moving.get(index, ((), ()))
            current = reassignment.Assignment(assignment[index], adding, removing)
            if complete:
                state = decode_partition_state(state_node[0]) if state_node is not None else None
                wanted = reassignment.completed(current, state.isr if state is not None else ())
            else:
                target = targets[index]
                if target is not None and (why := reassignment.invalid_target(target, live)) is not None:
                    logger.warning("reassignment of %s-%d to %s refused: %s", topic, index, list(target), why)
                    continue
                if target is None and not current.moving:
                    continue
                wanted = reassignment.start(current, target)
            if wanted is None or state_node is None:
                continue
            decided = reassignment.moved_state(decode_partition_state(state_node[0]), wanted, live, epoch.epoch)
            if decided is None:
                logger.info("reassignment of %s-%d waits: no live in-sync replica of %s", topic, index, wanted.replicas)
                continue
            assignment[index] = wanted.replicas
            moving[index] = (wanted.adding, wanted.removing)
            path = zk_paths.partition_state(topic, index)
            ops.append(SetData(path, encode_partition_state(decided), state_node[1].version))
            logger.info(
                "reassignment of %s-%d %s: replicas %s (adding %s, removing %s), leader %d in epoch %d",
                topic, index, "completed" if complete else "started" if targets[index] is not None else "cancelled",
                list(wanted.replicas), list(wanted.adding), list(wanted.removing), decided.leader, decided.leader_epoch,
            )  # fmt: skip
        if not ops:
            return True
        ops.insert(0, SetData(zk_paths.topic(topic), encode_topic(topic_id, assignment, moving), topic_node[1].version))
        try:
            await self._commit(epoch, ops)
        except TransactionFailedError as exc:
            logger.info("partition reassignment of %r raced with another writer (%s); retrying", topic, exc)
            return False
        return True
