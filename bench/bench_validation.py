"""What the broker's record check costs on the produce path, per codec.

Before an append the broker checks each batch's header and CRC (``record.validation = header``)
and, by default (``full``), walks its records to see that they agree with the header,
decompressing a compressed batch in 64 KiB pieces (protocol.records.check_records). Both run over
the same corpus of batches (bench_records' JSON activity events: 320 x 200 B or 64 x 1 KiB per
batch), alternating in paired rounds; the ratio full/header is the price of the check, and the
table gives each as CPU-seconds per GB of batches (compressed bytes, what the broker receives) and
as MB/s of uncompressed key + value. Run from the repository root::

    .venv/bin/python -m bench.bench_validation [--quick] [--seconds S] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

from tributary.protocol.compression import Compression
from tributary.protocol.records import check_records, validate_batch

from . import common
from .bench_records import SHAPES, make_corpus, measure, ours_build

DEFAULT_SECONDS = 2.5
QUICK_SECONDS = 0.1
CODECS = tuple(Compression)
#: The broker's default bound on one batch's inflated records (max.message.bytes x 100).
LIMIT = 1048588 * 100


def header_only(batches: Sequence[bytes]) -> None:
    for data in batches:
        validate_batch(data)


def full(batches: Sequence[bytes]) -> None:
    for data in batches:
        check_records(data, 0, validate_batch(data), max_size=LIMIT)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    common.add_arguments(parser, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    args = parser.parse_args(argv)
    settings = common.settings(args, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    count = 4 if settings.quick else 16
    rows = []
    for value_size, per_batch in SHAPES:
        corpus = make_corpus(value_size, per_batch, count)
        payload = sum(len(key) + len(value) for batch in corpus for key, value, _ in batch)
        for codec in CODECS:
            batches = ours_build(corpus, codec)
            wire = sum(map(len, batches))
            inner, times = measure(lambda b=batches: full(b), lambda b=batches: header_only(b), settings)
            per_pass = [statistics.median(t) / inner for t in times]
            rows.append(
                [
                    f"{value_size} B x {per_batch}",
                    codec.name.lower(),
                    f"{per_pass[1] / wire * 1e9:,.2f}",
                    f"{per_pass[0] / wire * 1e9:,.2f}",
                    f"{payload / per_pass[0] / 1e6:,.0f}",
                    f"{1 / common.paired_ratio(times[0], times[1]):.1f}x",
                ]
            )
    print("The broker's append check: header and CRC only, against the full record check (the default)")
    print(common.machine_line())
    print(f"corpus: {count} batches per shape; paired rounds, medians")
    print(
        common.table(
            ["batches", "codec", "header s/GB", "full s/GB", "full MB/s (records)", "full/header"], rows, left=2
        )
    )


if __name__ == "__main__":
    main()
