"""A test hook: ``TRIBUTARY_LOADER_TEST_KILL_AT=<phase>`` makes the driver kill itself
with SIGKILL (and its process group, JVM included, when it leads one) on reaching
that phase, so tests can cut a run at an exact point while the real code path runs.

Phases: ``planned`` (plan persisted), ``read:<task>`` (in the executor, see
read.py), ``staged`` (Parquet staged, publish list not yet written),
``publish:<n>`` (after n files were published), ``commit`` (manifest written,
commit not yet created), ``committed`` (commit created, staging not cleaned).

Two more act in an executor only, once per load (a marker file in
``TRIBUTARY_LOADER_TEST_MARKER_DIR`` remembers it, so Spark's retry of the task
runs normally): ``worker:<task>`` kills the Python worker running that task, as
an executor losing its Python process would; ``pause:<task>`` writes
``paused-<task>`` there, holding its pid, and waits (until the test writes ``resume-<task>``
there, or ``PAUSE_S``), so a test can kill the worker JVM under a running task, start a second
load while this one holds the warehouse, or kill a broker before the task reads on.
"""

from __future__ import annotations

import os
import signal
import time

KILL_ENV = "TRIBUTARY_LOADER_TEST_KILL_AT"
DRIVER_PID_ENV = "TRIBUTARY_LOADER_DRIVER_PID"
MARKER_DIR_ENV = "TRIBUTARY_LOADER_TEST_MARKER_DIR"
#: The environment an executor needs for the hooks (session.py hands it to executors in other processes).
EXECUTOR_ENV = (KILL_ENV, DRIVER_PID_ENV, MARKER_DIR_ENV)
#: How long a paused task waits for the test to act (it is normally killed long before).
PAUSE_S = 120.0


def kill_process_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group if ``pid`` leads it, else ``pid`` alone."""
    if os.getpgid(pid) == pid:
        os.killpg(pid, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def reached(phase: str) -> None:
    if os.environ.get(KILL_ENV) == phase:
        kill_process_tree(os.getpid())


def _first_time(name: str) -> bool:
    """Whether this is the first time this load reaches ``name``: the marker is created
    exclusively, holding this process's pid and this module's file, so a retry of the task on
    another worker passes."""
    directory = os.environ.get(MARKER_DIR_ENV)
    if not directory:
        return False
    try:
        fd = os.open(os.path.join(directory, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    # The pid, and where this code was imported from (on a cluster: the archive the driver shipped).
    os.write(fd, f"{os.getpid()}\n{__file__}\n".encode())
    os.close(fd)
    return True


def reached_in_task(task: int) -> None:
    """The executor's hooks, after a task handed Spark a chunk (read.py)."""
    hook = os.environ.get(KILL_ENV, "")
    kind, _, target = hook.partition(":")
    if target != str(task):
        return
    if kind == "read":
        driver = os.environ.get(DRIVER_PID_ENV)
        if driver:
            kill_process_tree(int(driver))
    elif kind == "worker" and _first_time(f"worker-{task}"):
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "pause" and _first_time(f"paused-{task}"):
        resume = os.path.join(os.environ.get(MARKER_DIR_ENV, ""), f"resume-{task}")
        deadline = time.monotonic() + PAUSE_S
        while time.monotonic() < deadline and not os.path.exists(resume):
            time.sleep(0.05)
