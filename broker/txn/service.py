"""The trio driver of the transaction coordinator: it feeds requests, time and the cluster's
leadership changes into the state machine, and carries out what comes out of it.

- A request handler calls one of the ``async`` methods; the request gets a ticket and sleeps on
  it until a :class:`~.messages.Reply` for that ticket comes out of the state machine.
- A :class:`~.messages.Write` is appended at once (so writes leave in the order the state
  machine made them), then a task waits until the partition's in-sync replicas have it and feeds
  the outcome back (``write_completed``); other requests run meanwhile, and the state machine's
  pending states keep them from touching the transaction being written.
- A :class:`~.messages.SendMarkers` starts a :class:`~.markers.MarkerSender` delivery whose
  progress is fed back per partition.
- One task sleeps until the state machine's next deadline (transaction timeouts, expiry).
- :meth:`TxnService.follow_leadership` loads the ``__transaction_state`` partitions this broker
  comes to lead (their leader epoch is the coordinator epoch) and unloads those it stops leading,
  as the group coordinator does with ``__consumer_offsets``.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from tributary.broker.cluster.model import ClusterSnapshot
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.group.service import Clock, wall_clock_ms
from tributary.broker.txn.coordinator import TransactionCoordinator
from tributary.broker.txn.messages import (
    AddPartitionsRequest,
    Effect,
    EndRequest,
    InitRequest,
    InitResult,
    ListedTxn,
    NeedProducerId,
    Reply,
    SendMarkers,
    TopicPartition,
    TxnDescription,
)
from tributary.broker.txn.placement import TRANSACTION_STATE_TOPIC
from tributary.broker.txn.storage import TxnStorage, TxnStorageError
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

#: How long to wait before reading a partition again after a failed load.
LOAD_RETRY_S = 1.0


class MarkerDelivery(Protocol):
    """Has every partition of a decided transaction get its marker (:class:`~.markers.MarkerSender`)."""

    async def deliver(self, effect: SendMarkers) -> None: ...

    async def aclose(self) -> None: ...


class _Waiter:
    __slots__ = ("event", "result")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.result: Any = None


class TxnService:
    def __init__(
        self,
        coordinator: TransactionCoordinator,
        storage: TxnStorage,
        producer_ids: Callable[[], Awaitable[int]],
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.coordinator = coordinator
        self._storage = storage
        self._producer_ids = producer_ids
        self._clock = clock
        self._tickets = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._deadlines_changed = trio.Event()
        self._loads: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None
        #: Set by the broker once its marker sender exists (it needs the broker's partitions).
        self.markers: MarkerDelivery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Runs the timers, the writes' waits, the loads and the marker deliveries until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._run_timers)
                task_status.started()
        finally:
            if self.markers is not None:
                with trio.CancelScope(shield=True):
                    await self.markers.aclose()

    # --- requests --------------------------------------------------------------------------------

    async def init_producer_id(self, req: InitRequest) -> InitResult:
        fresh: int | None = None
        while True:
            ticket = next(self._tickets)
            waiter = self._waiting[ticket] = _Waiter()
            try:
                effects = self.coordinator.init_producer_id(self._clock(), ticket, req, fresh)
                if isinstance(effects, NeedProducerId):
                    fresh = await self._producer_ids()
                    continue
                self._apply(effects)
                await waiter.event.wait()
                result: InitResult = waiter.result
                return result
            finally:
                self._waiting.pop(ticket, None)

    async def add_partitions(self, req: AddPartitionsRequest) -> ErrorCode:
        result: ErrorCode = await self._wait(lambda now, ticket: self.coordinator.add_partitions(now, ticket, req))
        return result

    async def end_txn(self, req: EndRequest) -> ErrorCode:
        result: ErrorCode = await self._wait(lambda now, ticket: self.coordinator.end_txn(now, ticket, req))
        return result

    def describe(self, transactional_id: str) -> TxnDescription:
        return self.coordinator.describe(transactional_id)

    def list_transactions(
        self, states: list[str], producer_ids: list[int], duration_ms: int
    ) -> tuple[ErrorCode, list[ListedTxn], list[str]]:
        return self.coordinator.list_transactions(self._clock(), states, producer_ids, duration_ms)

    async def _wait(self, call: Callable[[int, int], list[Effect]]) -> Any:
        ticket = next(self._tickets)
        waiter = self._waiting[ticket] = _Waiter()
        try:
            self._apply(call(self._clock(), ticket))
            await waiter.event.wait()
            return waiter.result
        finally:
            # A cancelled handler (its connection closed) leaves nothing behind; the state
            # machine's later reply to this ticket is then dropped.
            self._waiting.pop(ticket, None)

    # --- effects -----------------------------------------------------------------------------------

    def _apply(self, effects: list[Effect]) -> None:
        """Carries out effects without waiting: writes are appended now, and their waits and the
        marker deliveries run as tasks that feed their outcomes back."""
        for effect in effects:
            if isinstance(effect, Reply):
                waiter = self._waiting.pop(effect.ticket, None)
                if waiter is not None:
                    waiter.result = effect.result
                    waiter.event.set()
            elif isinstance(effect, SendMarkers):
                self._start(self._deliver, effect)
            else:
                error, target, end = self._storage.append(effect.partition, effect.key, effect.value, self._clock())
                if target is None:
                    self._apply(self.coordinator.write_completed(self._clock(), effect.write_id, error))
                else:
                    self._start(self._await_write, effect.write_id, target, end)
        self._deadlines_changed.set()

    def _start(self, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        assert self._nursery is not None, "TxnService.run is not running"
        self._nursery.start_soon(fn, *args)

    async def _await_write(self, write_id: int, target: Any, end: int) -> None:
        timeout = self.coordinator.config.write_timeout_ms / 1000
        error = await self._storage.durable(target, end, timeout)
        self._guarded(lambda: self.coordinator.write_completed(self._clock(), write_id, error), "a write's outcome")

    def _guarded(self, call: Callable[[], list[Effect]], what: str) -> None:
        """Runs a call of the state machine from a background task: a bug there is logged, not
        allowed to stop the coordinator (and with it the broker)."""
        try:
            effects = call()
        except Exception:
            log.exception("transaction coordinator: %s failed", what)
            return
        self._apply(effects)

    async def _deliver(self, effect: SendMarkers) -> None:
        """Until the markers are all written or no longer this coordinator's to write. A bug in a
        delivery must not take the coordinator (and the broker) down, nor leave the transaction
        undecided in its partitions: it is logged and the delivery starts again."""
        assert self.markers is not None, "the broker did not give the coordinator a marker sender"
        while True:
            try:
                await self.markers.deliver(effect)
            except Exception:
                log.exception("delivering the markers of transactional id %s failed; retrying",
                              effect.transactional_id)  # fmt: skip
                await trio.sleep(LOAD_RETRY_S)
            else:
                return

    # Fed back by the marker sender.

    def is_current(self, transactional_id: str, coordinator_epoch: int) -> bool:
        partition = self.coordinator.partition_for(transactional_id)
        return self.coordinator.coordinator_epoch(partition) == coordinator_epoch

    def marker_written(self, transactional_id: str, coordinator_epoch: int, tp: TopicPartition) -> None:
        self._apply(self.coordinator.marker_written(self._clock(), transactional_id, coordinator_epoch, tp))

    def markers_abandoned(self, transactional_id: str, coordinator_epoch: int) -> None:
        self._apply(self.coordinator.markers_abandoned(self._clock(), transactional_id, coordinator_epoch))

    async def _run_timers(self) -> None:
        while True:
            self._deadlines_changed = trio.Event()
            deadline = self.coordinator.next_deadline()
            if deadline is None:
                await self._deadlines_changed.wait()
                continue
            delay = (deadline - self._clock()) / 1000
            if delay > 0:
                with trio.move_on_after(delay):
                    await self._deadlines_changed.wait()
                continue
            self._guarded(lambda: self.coordinator.advance(self._clock()), "its timers")

    # --- leadership of __transaction_state partitions -------------------------------------------------

    def partition_gained(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads ``partition`` in ``coordinator_epoch``: load it in the background."""
        assert self._nursery is not None, "TxnService.run is not running"
        self._cancel_load(partition)
        token = self.coordinator.begin_loading(partition, coordinator_epoch)
        scope = trio.CancelScope()
        self._loads[partition] = scope
        self._nursery.start_soon(self._load, partition, token, scope)

    def partition_lost(self, partition: int) -> None:
        self._cancel_load(partition)
        self._apply(self.coordinator.unload(self._clock(), partition))

    def _cancel_load(self, partition: int) -> None:
        scope = self._loads.pop(partition, None)
        if scope is not None:
            scope.cancel()

    async def _load(self, partition: int, token: int, scope: trio.CancelScope) -> None:
        with scope:
            started = time.monotonic()
            while True:
                try:
                    records = await self._storage.read(partition)
                    break
                except TxnStorageError as exc:
                    log.warning("loading %s-%d failed, retrying: %s", TRANSACTION_STATE_TOPIC, partition, exc)
                    await trio.sleep(LOAD_RETRY_S)
            self._apply(self.coordinator.finish_loading(self._clock(), partition, token, records))
            log.info("loaded %s-%d in %.3f s", TRANSACTION_STATE_TOPIC, partition, time.monotonic() - started)
        if self._loads.get(partition) is scope:
            del self._loads[partition]

    async def follow_leadership(
        self, registry: ClusterRegistry, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Keeps the coordinator in line with the registry: loads the ``__transaction_state``
        partitions this broker leads, in their leader epoch, and unloads the others. Started once
        the current leadership has been applied (loads may still run)."""
        previous: ClusterSnapshot | None = None
        async for snapshot in registry.snapshots():
            self._follow(previous, snapshot, registry.broker_id)
            if previous is None:
                task_status.started()
            previous = snapshot

    def _follow(self, previous: ClusterSnapshot | None, snapshot: ClusterSnapshot, broker_id: int) -> None:
        info = snapshot.topics.get(TRANSACTION_STATE_TOPIC)
        led: dict[int, int] = {}
        if info is not None:
            self.coordinator.set_partition_count(len(info.partitions))
            led = {p: state.leader_epoch for p, state in info.partitions.items() if state.leader == broker_id}
        before = previous.topics.get(TRANSACTION_STATE_TOPIC) if previous is not None else None
        recreated = before is not None and (info is None or info.topic_id != before.topic_id)
        for partition in sorted(self.coordinator.owned_partitions):
            epoch = self.coordinator.coordinator_epoch(partition)
            if recreated or partition not in led or led[partition] != epoch:
                self.partition_lost(partition)
        for partition, epoch in sorted(led.items()):
            if self.coordinator.coordinator_epoch(partition) != epoch:
                self.partition_gained(partition, epoch)
