"""The transaction coordinator's trio driver, on trio's MockClock: requests answered only once
their write is replicated, timeouts fired on time, markers delivered, leadership followed."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from tributary.broker.txn.coordinator import TransactionCoordinator
from tributary.broker.txn.messages import AddPartitionsRequest, EndRequest, InitRequest, SendMarkers
from tributary.broker.txn.records import decode_key, decode_value
from tributary.broker.txn.service import TxnService
from tributary.broker.txn.state import TxnState
from tributary.protocol.error_codes import ErrorCode

from .harness import CONFIG, COORDINATOR_EPOCH

TXN = "orders-1"
TP = ("orders", 1)


class MemoryStorage:
    """``__transaction_state`` in memory; a write is replicated when :attr:`replicated` is set."""

    def __init__(self) -> None:
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.replicated = trio.Event()
        self.replicated.set()
        self.refuse: ErrorCode | None = None

    def append(self, partition: int, key: bytes, value: bytes | None, now_ms: int) -> tuple[ErrorCode, Any, int]:
        if self.refuse is not None:
            return self.refuse, None, -1
        self.log[partition].append((key, value))
        return ErrorCode.NONE, partition, len(self.log[partition])

    async def durable(self, target: Any, offset: int, timeout_s: float) -> ErrorCode:
        with trio.move_on_after(timeout_s):
            await self.replicated.wait()
            return ErrorCode.NONE
        return ErrorCode.REQUEST_TIMED_OUT

    async def read(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return list(self.log[partition])

    def states(self) -> list[TxnState]:
        written = [(k, v) for records in self.log.values() for k, v in records]
        return [decode_value(v).state for k, v in written if v is not None and decode_key(k) == TXN]


class Markers:
    """Writes each partition's marker after ``delay`` seconds, feeding the service back."""

    def __init__(self) -> None:
        self.service: TxnService | None = None
        self.delivered: list[SendMarkers] = []
        self.delay = 0.5

    async def deliver(self, effect: SendMarkers) -> None:
        assert self.service is not None
        await trio.sleep(self.delay)
        self.delivered.append(effect)
        for tp in sorted(effect.partitions):
            self.service.marker_written(effect.transactional_id, effect.coordinator_epoch, tp)

    async def aclose(self) -> None:
        pass


def clock_ms() -> int:
    return int(trio.current_time() * 1000)


@pytest.fixture
async def storage() -> MemoryStorage:
    return MemoryStorage()


@pytest.fixture
async def markers() -> Markers:
    return Markers()


@pytest.fixture
async def service(storage: MemoryStorage, markers: Markers) -> AsyncIterator[TxnService]:
    """A running service leading every partition. Tests using it must also request
    ``autojump_clock``: pytest-trio takes the clock from the test's own arguments."""
    ids = itertools.count(500)

    async def producer_ids() -> int:
        return next(ids)

    svc = TxnService(TransactionCoordinator(CONFIG), storage, producer_ids, clock_ms)
    svc.markers = markers
    markers.service = svc
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        for partition in range(CONFIG.state_log_partitions):
            svc.partition_gained(partition, COORDINATOR_EPOCH)
        await trio.testing.wait_all_tasks_blocked()
        yield svc
        nursery.cancel_scope.cancel()


async def test_a_request_is_answered_once_its_write_is_replicated(
    service: TxnService, storage: MemoryStorage, autojump_clock: trio.testing.MockClock
) -> None:
    storage.replicated = trio.Event()
    answered: list[Any] = []

    async def init() -> None:
        answered.append(await service.init_producer_id(InitRequest(TXN, 10_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(init)
        await trio.sleep(5)
        assert answered == [] and storage.states() == [TxnState.EMPTY]  # written, not yet replicated
        storage.replicated.set()
    (result,) = answered
    assert (result.error, result.producer_id, result.producer_epoch) == (ErrorCode.NONE, 500, 0)


async def test_an_unreplicated_write_times_out_and_changes_nothing(
    service: TxnService, storage: MemoryStorage, autojump_clock: trio.testing.MockClock
) -> None:
    producer = await service.init_producer_id(InitRequest(TXN, 10_000))
    storage.replicated = trio.Event()
    start = trio.current_time()
    request = AddPartitionsRequest(TXN, producer.producer_id, producer.producer_epoch, frozenset({TP}))
    assert await service.add_partitions(request) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert trio.current_time() - start == pytest.approx(CONFIG.write_timeout_ms / 1000)
    assert service.describe(TXN).state == "Empty"


async def test_commit_sends_markers_then_completes(
    service: TxnService, storage: MemoryStorage, markers: Markers, autojump_clock: trio.testing.MockClock
) -> None:
    producer = await service.init_producer_id(InitRequest(TXN, 10_000))
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert await service.add_partitions(AddPartitionsRequest(TXN, pid, epoch, frozenset({TP}))) == ErrorCode.NONE
    assert await service.end_txn(EndRequest(TXN, pid, epoch, True)) == ErrorCode.NONE
    assert service.describe(TXN).state == "PrepareCommit"
    await trio.sleep(1)
    assert [m.commit for m in markers.delivered] == [True]
    assert service.describe(TXN).state == "CompleteCommit"
    assert storage.states() == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]


async def test_the_timeout_aborts_on_time(
    service: TxnService, storage: MemoryStorage, markers: Markers, autojump_clock: trio.testing.MockClock
) -> None:
    producer = await service.init_producer_id(InitRequest(TXN, 5_000))
    pid, epoch = producer.producer_id, producer.producer_epoch
    await service.add_partitions(AddPartitionsRequest(TXN, pid, epoch, frozenset({TP})))
    started = trio.current_time()
    while not markers.delivered:
        await trio.sleep(0.1)
    waited = trio.current_time() - started
    # Past the timeout, within one check interval (plus the markers' delivery).
    interval = CONFIG.abort_timed_out_interval_ms / 1000
    assert 5 < waited <= 5 + interval + markers.delay + 0.2, waited
    (aborted,) = markers.delivered
    assert (aborted.commit, aborted.producer_epoch) == (False, epoch + 1)
    assert await service.end_txn(EndRequest(TXN, pid, epoch, True)) == ErrorCode.PRODUCER_FENCED


async def test_losing_the_partition_stops_its_markers_and_the_next_leader_resumes(
    service: TxnService, storage: MemoryStorage, markers: Markers, autojump_clock: trio.testing.MockClock
) -> None:
    markers.delay = 10
    producer = await service.init_producer_id(InitRequest(TXN, 60_000))
    pid, epoch = producer.producer_id, producer.producer_epoch
    await service.add_partitions(AddPartitionsRequest(TXN, pid, epoch, frozenset({TP})))
    assert await service.end_txn(EndRequest(TXN, pid, epoch, False)) == ErrorCode.NONE
    partition = service.coordinator.partition_for(TXN)
    service.partition_lost(partition)
    assert service.describe(TXN).error == ErrorCode.NOT_COORDINATOR
    await trio.sleep(11)  # the old delivery ends: its reports are for a coordinator epoch gone
    assert TxnState.COMPLETE_ABORT not in storage.states()
    service.partition_gained(partition, COORDINATOR_EPOCH + 1)
    await trio.sleep(11)
    assert [m.coordinator_epoch for m in markers.delivered] == [COORDINATOR_EPOCH, COORDINATOR_EPOCH + 1]
    assert service.describe(TXN).state == "CompleteAbort"
