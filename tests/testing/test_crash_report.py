"""tests/fixtures/crashes.py: a worker that dies of a fatal signal is explained under the summary.

A throwaway suite of two tests runs on one xdist worker: the first faults (a read of address 0
through ctypes), the second runs on the worker xdist starts in its place. The run's output must
show the dump of the crashed worker (the signal and the test's stack) under xdist's own one-line
report, just before the short test summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
import ctypes


def test_faults():
    ctypes.string_at(0)


def test_runs_after_it():
    assert True
"""


def test_a_crashed_workers_signal_and_stack_end_the_output(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.fixtures.crashes"]\n')
    (tmp_path / "test_crashing.py").write_text(SUITE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "-p", "no:cacheprovider", "-q", str(tmp_path)],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "1 failed, 1 passed" in out, out
    assert "crashed while running 'test_crashing.py::test_faults'" in out, out
    report = out[out.index("faulthandler: worker gw0 died of a fatal signal") :]
    assert "Fatal Python error: Segmentation fault" in report, report
    assert 'test_crashing.py", line 6 in test_faults' in report, report
    # After the failures, just before the short summary: inside the tail a CI log shows.
    assert out.index("= FAILURES =") < out.index("faulthandler: worker") < out.index("short test summary info"), out
