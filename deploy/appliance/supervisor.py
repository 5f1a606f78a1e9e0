"""Supervised child processes: start them, restart the ones that crash, stop them cleanly.

One `Supervisor` runs any number of children, each in its own task of a Trio nursery.
A child that exits while it should be running is started again after a delay from
its `Backoff`: doubling from `initial` up to `maximum`, and back to `initial` once
a run lasted `stable_after` seconds (a child that crashes now and then restarts
quickly; one that cannot start at all is retried ever more slowly instead of
spinning). Stopping a child sends SIGTERM and, after `grace` seconds, SIGKILL.

A child may have a `before_start` hook, awaited before every start: a broker killed
with SIGKILL leaves its ephemeral registration in ZooKeeper until its session expires,
and a new broker with the same id is refused until then, so the appliance waits for
that node to vanish rather than burning attempts (see deploy/appliance.py).

How a process is launched is a parameter (`launch`), so that the timing policy can be
tested under trio's MockClock with stand-in processes (tests/deploy/test_supervisor.py);
`launch_process` is the real one. Children run in their own session (process group):
Ctrl-C in the terminal reaches the supervisor only, which then stops them in order.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import trio

log = logging.getLogger("tributary.supervisor")


@dataclass(frozen=True)
class ChildSpec:
    """What to run: ``name`` is unique in the supervisor, e.g. ``broker/east/1``."""

    name: str
    argv: Sequence[str]
    log_path: Path
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    before_start: Callable[[], Awaitable[None]] | None = None


class ChildProcess(Protocol):
    """The part of trio.Process the supervisor uses."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    async def wait(self) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


Launch = Callable[[ChildSpec], Awaitable[ChildProcess]]


async def launch_process(spec: ChildSpec) -> ChildProcess:
    """Start ``spec`` for real, appending its stdout and stderr to its log file."""
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with spec.log_path.open("ab") as log_file:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log_file.write(f"==== {stamp} tributary up starts: {' '.join(spec.argv)}\n".encode())
        log_file.flush()
        env = None if spec.env is None else {**os.environ, **spec.env}
        # The child holds its own copy of the descriptor; ours can close at once.
        return await trio.lowlevel.open_process(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=spec.cwd,
            env=env,
            start_new_session=True,
        )


@dataclass
class Backoff:
    """Delays between restarts: exponential, reset by a run of ``stable_after`` seconds."""

    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 30.0
    stable_after: float = 60.0
    _next: float = field(default=-1.0, init=False, repr=False)

    def delay_after(self, ran_for: float) -> float:
        """The delay before the next start of a child whose last run lasted ``ran_for`` s."""
        if self._next < 0 or ran_for >= self.stable_after:
            self._next = self.initial
        delay = self._next
        self._next = min(self._next * self.factor, self.maximum)
        return delay


class State(enum.Enum):
    WAITING = "waiting"  # in before_start
    RUNNING = "running"
    BACKOFF = "backoff"  # exited; waiting to be started again
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass
class Child:
    """What the supervisor knows about one child, for `tributary up` to print."""

    spec: ChildSpec
    state: State = State.WAITING
    pid: int | None = None
    starts: int = 0
    last_exit: int | None = None
    started_at: float | None = None
    stopped: trio.Event = field(default_factory=trio.Event, repr=False)

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)


@dataclass(frozen=True)
class Event:
    """Something that happened to a child: started, exited, restarting (with delay), stopped."""

    child: str
    kind: str
    pid: int | None = None
    returncode: int | None = None
    delay: float | None = None

    def describe(self) -> str:
        if self.kind == "started":
            return f"{self.child}: started (pid {self.pid})"
        if self.kind == "exited":
            return f"{self.child}: pid {self.pid} {describe_returncode(self.returncode)}"
        if self.kind == "restarting":
            return f"{self.child}: restarting in {self.delay:.1f} s"
        if self.kind == "stopped":
            return f"{self.child}: stopped (pid {self.pid}, {describe_returncode(self.returncode)})"
        return f"{self.child}: {self.kind}"


def describe_returncode(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code > 128:
        # A JVM, a shell and Python's default handlers report death by signal N as 128 + N.
        with contextlib.suppress(ValueError):
            return f"exited with status {code} ({signal.Signals(code - 128).name})"
    return f"exited with status {code}"


class Supervisor:
    """Runs children in one nursery; `stop()` ends them all (SIGTERM, then SIGKILL after ``grace``)."""

    def __init__(
        self,
        *,
        launch: Launch = launch_process,
        backoff: Callable[[], Backoff] = Backoff,
        grace: float = 15.0,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self._launch = launch
        self._backoff = backoff
        self._grace = grace
        self._on_event = on_event or (lambda event: log.info("%s", event.describe()))
        self.children: dict[str, Child] = {}
        self._scopes: dict[str, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled, or until `stop()` is called and every child has ended."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            # Keeps the nursery open while no child runs yet; stop() cancels it.
            self._idle = trio.CancelScope()
            nursery.start_soon(self._hold_open)
            task_status.started(self)
        self._nursery = None

    async def _hold_open(self) -> None:
        with self._idle:
            await trio.sleep_forever()

    def add(self, spec: ChildSpec) -> Child:
        """Start supervising ``spec`` now."""
        if self._nursery is None:
            raise RuntimeError("the supervisor is not running")
        if spec.name in self.children:
            raise ValueError(f"child {spec.name!r} exists already")
        child = Child(spec)
        self.children[spec.name] = child
        scope = trio.CancelScope()
        self._scopes[spec.name] = scope
        self._nursery.start_soon(self._supervise, child, scope)
        return child

    async def stop_children(self, names: Sequence[str]) -> None:
        """Stop these children (all at once) and wait until each has exited."""
        for name in names:
            self._scopes[name].cancel()
        for name in names:
            await self.children[name].stopped.wait()

    def stop(self) -> None:
        """Stop everything (at once); `run` returns when every child has exited."""
        for scope in self._scopes.values():
            scope.cancel()
        with contextlib.suppress(AttributeError):
            self._idle.cancel()

    async def _supervise(self, child: Child, scope: trio.CancelScope) -> None:
        backoff = self._backoff()
        try:
            with scope:
                await self._keep_running(child, backoff)
        finally:
            # Also when the whole nursery is cancelled (not just this child's scope).
            child.state = State.STOPPED
            child.stopped.set()

    async def _keep_running(self, child: Child, backoff: Backoff) -> None:
        while True:
            child.state = State.WAITING
            if child.spec.before_start is not None:
                try:
                    await child.spec.before_start()
                except Exception as exc:
                    # The hook only saves wasted attempts: start anyway, the backoff still applies.
                    self._on_event(Event(child.spec.name, f"before-start check failed ({exc}); starting anyway"))
            ran_for = await self._run_once(child)
            delay = backoff.delay_after(ran_for)
            child.state = State.BACKOFF
            self._on_event(Event(child.spec.name, "restarting", delay=delay))
            await trio.sleep(delay)

    async def _run_once(self, child: Child) -> float:
        """Start the child and wait for it to exit; on cancellation stop it first. Returns its run time."""
        try:
            process = await self._launch(child.spec)
        except OSError as exc:
            # A missing executable or working directory: as good as a crash at start.
            self._on_event(Event(child.spec.name, f"could not start: {exc}"))
            return 0.0
        started = trio.current_time()
        child.pid, child.state, child.started_at = process.pid, State.RUNNING, started
        child.starts += 1
        self._on_event(Event(child.spec.name, "started", pid=process.pid))
        try:
            returncode = await process.wait()
        except trio.Cancelled:
            child.state = State.STOPPING
            with trio.CancelScope(shield=True):
                returncode = await self._terminate(process)
            child.last_exit = returncode
            self._on_event(Event(child.spec.name, "stopped", pid=process.pid, returncode=returncode))
            raise
        child.last_exit = returncode
        self._on_event(Event(child.spec.name, "exited", pid=process.pid, returncode=returncode))
        return trio.current_time() - started

    async def _terminate(self, process: ChildProcess) -> int:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with trio.move_on_after(self._grace):
                return await process.wait()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        return await process.wait()
