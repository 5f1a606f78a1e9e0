"""The supervisor's timing policy under trio's MockClock, with stand-in processes.

Real processes under `tributary up` are covered by tests/deploy/test_up.py; here the
clock is virtual (autojump), so restart delays, resets and kill grace periods are
asserted to the exact virtual second.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from tributary.deploy.appliance.supervisor import Backoff, ChildProcess, ChildSpec, Event, State, Supervisor


class FakeProcess:
    """Exits by itself after ``runs_for`` seconds, or on a signal it does not ignore."""

    def __init__(self, pid: int, runs_for: float, *, ignores_sigterm: bool = False) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.runs_for = runs_for
        self.ignores_sigterm = ignores_sigterm
        self.signals: list[tuple[float, int]] = []
        self._exited = trio.Event()

    def _exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._exited.set()

    async def wait(self) -> int:
        with trio.move_on_after(self.runs_for):
            await self._exited.wait()
        self._exit(1)  # crashed on its own (no-op if a signal ended it)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.signals.append((trio.current_time(), sig))
        if not (sig == signal.SIGTERM and self.ignores_sigterm):
            self._exit(-sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """Starts FakeProcesses whose run times come from a script; records when."""

    def __init__(self, run_times: list[float], **options: bool) -> None:
        self.run_times = run_times
        self.options = options
        self.starts: list[float] = []
        self.processes: list[FakeProcess] = []

    async def __call__(self, spec: ChildSpec) -> ChildProcess:
        runs_for = self.run_times[len(self.starts)] if len(self.starts) < len(self.run_times) else float("inf")
        self.starts.append(trio.current_time())
        process = FakeProcess(1000 + len(self.starts), runs_for, **self.options)
        self.processes.append(process)
        return process


def spec(name: str = "broker/east/1", before_start: Callable[[], object] | None = None) -> ChildSpec:
    return ChildSpec(name, ["true"], Path("/nonexistent/log"), before_start=before_start)  # type: ignore[arg-type]


def test_backoff_doubles_caps_and_resets() -> None:
    backoff = Backoff(initial=1, factor=2, maximum=8, stable_after=10)
    assert [backoff.delay_after(0.1) for _ in range(6)] == [1, 2, 4, 8, 8, 8]
    assert backoff.delay_after(10) == 1  # a run that long counts as healthy
    assert backoff.delay_after(9.9) == 2


async def test_crashing_child_restarts_with_growing_delays(autojump_clock: trio.testing.MockClock) -> None:
    launcher = Launcher([0.1, 0.1, 0.1, 100, 0.1])
    events: list[Event] = []
    supervisor = Supervisor(
        launch=launcher,
        backoff=lambda: Backoff(initial=1, factor=2, maximum=30, stable_after=10),
        on_event=events.append,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        child = supervisor.add(spec())
        await trio.sleep(200)
        assert child.state is State.RUNNING
        supervisor.stop()
    # 0 -> crash at 0.1 -> +1 -> 1.1 -> crash 1.2 -> +2 -> 3.2 -> crash 3.3 -> +4 -> 7.3,
    # runs 100 s (healthy) -> +1 (reset) -> 108.3 -> crash 108.4 -> +2 -> 110.4 (runs on).
    assert launcher.starts == pytest.approx([0, 1.1, 3.2, 7.3, 108.3, 110.4])
    assert [e.delay for e in events if e.kind == "restarting"] == [1, 2, 4, 1, 2]
    assert child.starts == 6
    assert child.restarts == 5
    assert child.state is State.STOPPED
    assert events[-1].kind == "stopped"
    assert events[-1].returncode == -signal.SIGTERM


async def test_stop_sends_sigterm_then_sigkill_after_grace(autojump_clock: trio.testing.MockClock) -> None:
    launcher = Launcher([], ignores_sigterm=True)
    supervisor = Supervisor(launch=launcher, grace=7)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        supervisor.add(spec())
        await trio.sleep(5)
        supervisor.stop()
    assert trio.current_time() == pytest.approx(12)
    assert launcher.processes[0].signals == [(pytest.approx(5), signal.SIGTERM), (pytest.approx(12), signal.SIGKILL)]
    assert launcher.processes[0].returncode == -signal.SIGKILL


async def test_stop_during_backoff_starts_nothing_more(autojump_clock: trio.testing.MockClock) -> None:
    launcher = Launcher([1.0])
    supervisor = Supervisor(launch=launcher, backoff=lambda: Backoff(initial=60))
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        child = supervisor.add(spec())
        await trio.sleep(30)
        assert child.state is State.BACKOFF
        await supervisor.stop_children([child.spec.name])
        assert child.state is State.STOPPED
        supervisor.stop()
    assert launcher.starts == [0]
    assert trio.current_time() == pytest.approx(30)


async def test_before_start_is_awaited_before_every_start(autojump_clock: trio.testing.MockClock) -> None:
    launcher = Launcher([0.5, 0.5])
    checks: list[float] = []

    async def wait_for_session_expiry() -> None:
        checks.append(trio.current_time())
        await trio.sleep(3)

    supervisor = Supervisor(launch=launcher, backoff=lambda: Backoff(initial=1, factor=2))
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        supervisor.add(spec(before_start=wait_for_session_expiry))
        await trio.sleep(20)
        supervisor.stop()
    # check 0..3, run 3..3.5, +1, check 4.5..7.5, run ..8, +2, check 10..13, run on.
    assert checks == pytest.approx([0, 4.5, 10])
    assert launcher.starts == pytest.approx([3, 7.5, 13])


async def test_failing_before_start_does_not_stop_the_child(autojump_clock: trio.testing.MockClock) -> None:
    launcher = Launcher([])
    events: list[Event] = []

    async def broken() -> None:
        raise ConnectionError("zookeeper unreachable")

    supervisor = Supervisor(launch=launcher, on_event=events.append)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        supervisor.add(spec(before_start=broken))
        await trio.sleep(1)
        supervisor.stop()
    assert launcher.starts == [0]
    assert "zookeeper unreachable" in events[0].kind


async def test_children_are_independent(autojump_clock: trio.testing.MockClock) -> None:
    crashing, steady = Launcher([0.1]), Launcher([])

    async def launch(s: ChildSpec) -> ChildProcess:
        return await (crashing if s.name == "mirror/east" else steady)(s)

    supervisor = Supervisor(launch=launch, backoff=lambda: Backoff(initial=2))
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        supervisor.add(spec("mirror/east"))
        supervisor.add(spec("broker/east/1"))
        await trio.sleep(10)
        supervisor.stop()
    assert crashing.starts == pytest.approx([0, 2.1])
    assert steady.starts == [0]
    assert steady.processes[0].signals == [(pytest.approx(10), signal.SIGTERM)]


async def test_adding_a_name_twice_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    supervisor = Supervisor(launch=Launcher([]))
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        supervisor.add(spec())
        with pytest.raises(ValueError, match="exists already"):
            supervisor.add(spec())
        supervisor.stop()


async def test_cancelling_everything_still_marks_children_stopped(autojump_clock: trio.testing.MockClock) -> None:
    launcher = Launcher([], ignores_sigterm=True)
    supervisor = Supervisor(launch=launcher, grace=3)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        child = supervisor.add(spec())
        await trio.sleep(1)
        nursery.cancel_scope.cancel()  # not stop(): the whole nursery, as a second Ctrl-C does
    # The child was still terminated (SIGTERM, SIGKILL after the grace), and waiters are released.
    assert child.state is State.STOPPED
    assert child.stopped.is_set()
    assert [sig for _, sig in launcher.processes[0].signals] == [signal.SIGTERM, signal.SIGKILL]
    assert trio.current_time() == pytest.approx(4)
