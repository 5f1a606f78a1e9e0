"""CRC-32C throughput: the ``crc32c`` package against ``crcmod``.

Both packages are called directly (``crc32c.crc32c`` and crcmod's
``mkCrcFun("crc-32c")``, which :mod:`protocol.crc32c` wraps) on 1 KiB,
64 KiB and 1 MiB buffers of seeded random bytes: a record batch's CRC is
taken over one such buffer. GB/s is 10^9 bytes per second, the median over
rounds; the ratio is the median of the per-round crc32c/crcmod ratios. The
report also says which implementation :func:`protocol.crc32c.crc32c` uses.
Run from the repository root::

    .venv/bin/python -m bench.bench_crc [--quick] [--seconds S] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import crc32c as crc32c_package
import crcmod.predefined

from tributary.protocol import crc32c as protocol_crc32c

from . import common
from .common import Rate

DEFAULT_SECONDS = 4.0
QUICK_SECONDS = 0.4
SEED = 32
SIZES = ((1024, "1 KiB"), (64 * 1024, "64 KiB"), (1024 * 1024, "1 MiB"))

CrcFn = Callable[[bytes], int]


@dataclass(frozen=True)
class Row:
    size: int
    label: str
    crcmod: common.Rate  # bytes per second
    crc32c: common.Rate
    ratio: float


def timed_loop(fn: CrcFn, data: bytes) -> Callable[[int], object]:
    def loop(n: int) -> None:
        for _ in range(n):
            fn(data)

    return loop


def crcmod_kind() -> str:
    return "C extension" if "crcmod._crcfunext" in sys.modules else "pure Python"


def measure(crcmod_fn: CrcFn, crc32c_fn: CrcFn, data: bytes, settings: common.Settings) -> tuple[Rate, Rate, float]:
    """Bytes per second of crcmod and of crc32c on ``data``, and their ratio."""
    slow, fast = timed_loop(crcmod_fn, data), timed_loop(crc32c_fn, data)
    # Each side loops long enough for the clock's grain not to matter, so the
    # two make different numbers of calls: the ratio is taken per call.
    n_slow = common.calibrate(slow, settings.min_round_seconds)
    n_fast = common.calibrate(fast, settings.min_round_seconds)
    times = common.paired_rounds(
        [lambda: slow(n_slow), lambda: fast(n_fast)], seconds=settings.seconds, repeat=settings.repeat
    )
    ratio = common.paired_ratio([t / n_fast for t in times[1]], [t / n_slow for t in times[0]])
    return common.rate(n_slow * len(data), times[0]), common.rate(n_fast * len(data), times[1]), ratio


def run(settings: common.Settings) -> list[Row]:
    crcmod_fn: CrcFn = crcmod.predefined.mkCrcFun("crc-32c")
    crc32c_fn: CrcFn = crc32c_package.crc32c
    rng = random.Random(SEED)
    rows = []
    for size, label in SIZES:
        data = rng.randbytes(size)
        if not crcmod_fn(data) == crc32c_fn(data) == protocol_crc32c.crc32c(data):
            raise AssertionError("the implementations disagree")
        rows.append(Row(size, label, *measure(crcmod_fn, crc32c_fn, data, settings)))
    return rows


def report(rows: Sequence[Row]) -> str:
    versions = (
        f"crcmod {importlib.metadata.version('crcmod')} ({crcmod_kind()}), "
        f"crc32c {importlib.metadata.version('crc32c')} "
        f"({'hardware' if crc32c_package.hardware_based else 'software'})"
    )
    return "\n".join(
        [
            "CRC-32C: crc32c package vs crcmod",
            common.machine_line(),
            versions,
            f"protocol.crc32c.crc32c uses: {protocol_crc32c.IMPLEMENTATION}",
            "GB/s = 10^9 bytes per second, median over rounds; ratio = median of per-round crc32c/crcmod",
            "",
            common.table(
                ["buffer", "crcmod GB/s", "crc32c GB/s", "crc32c/crcmod", "rounds"],
                [
                    [
                        r.label,
                        f"{r.crcmod.median / 1e9:.3f}",
                        f"{r.crc32c.median / 1e9:.3f}",
                        f"{r.ratio:.1f}x",
                        str(r.crc32c.rounds),
                    ]
                    for r in rows
                ],
            ),
        ]
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    common.add_arguments(parser, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    args = parser.parse_args(argv)
    settings = common.settings(args, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    rows = run(settings)
    if settings.json:
        print(
            json.dumps(
                {
                    "benchmark": "crc32c",
                    "machine": common.machine(),
                    "settings": {"seconds": settings.seconds, "repeat": settings.repeat},
                    "implementation": protocol_crc32c.IMPLEMENTATION,
                    "crcmod": crcmod_kind(),
                    "results": [
                        {
                            "buffer_bytes": r.size,
                            "crcmod_gb_per_s": r.crcmod.median / 1e9,
                            "crcmod_best_gb_per_s": r.crcmod.best / 1e9,
                            "crc32c_gb_per_s": r.crc32c.median / 1e9,
                            "crc32c_best_gb_per_s": r.crc32c.best / 1e9,
                            "ratio": r.ratio,
                            "rounds": r.crc32c.rounds,
                        }
                        for r in rows
                    ],
                },
                indent=2,
            )
        )
    else:
        print(report(rows))


if __name__ == "__main__":
    main()
