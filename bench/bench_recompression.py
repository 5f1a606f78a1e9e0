"""What a topic's ``compression.type`` costs on the produce path, against ``producer``.

With ``compression.type = producer`` (the default) a broker stores each batch as received: the
append checks it and writes it. A named codec makes the broker decompress every batch in another
codec and compress it again before it writes (Kafka's rule), the one place the produce path
recompresses. Each case appends the same corpus (bench_records' JSON activity events, 320 x 200 B
per batch) to a partition log on disk with the broker's defaults (full record check), next to the
same batches appended to a ``producer`` topic in paired rounds; the ratio is the case's append
time over ``producer``'s, and the table gives both as MB/s of batches as received. Run from the
repository root::

    .venv/bin/python -m bench.bench_recompression [--quick] [--seconds S] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tributary.broker.log.config import LogConfig
from tributary.broker.log.log import PartitionLog
from tributary.protocol.compression import Compression

from . import common
from .bench_records import make_corpus, measure, ours_build

DEFAULT_SECONDS = 2.5
QUICK_SECONDS = 0.25
VALUE_SIZE, PER_BATCH = 200, 320
#: (batches as produced, the topic's compression.type)
CASES = (
    (Compression.ZSTD, "zstd"),  # the same codec: stored as received, as under producer
    (Compression.GZIP, "zstd"),
    (Compression.LZ4, "zstd"),
    (Compression.NONE, "zstd"),
    (Compression.ZSTD, "gzip"),
    (Compression.ZSTD, "uncompressed"),
)


class Appender:
    """Appends a corpus to a log and empties it again (outside nothing: both sides pay it)."""

    def __init__(self, directory: Path, config: LogConfig, batches: Sequence[bytes]) -> None:
        self.log = PartitionLog.open(directory, config)
        self.batches = batches

    def __call__(self) -> None:
        now = int(time.time() * 1000)
        for batch in self.batches:
            self.log.append(batch, 0, now)
        self.log.truncate_fully_and_start_at(0, now)

    def close(self) -> None:
        self.log.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    common.add_arguments(parser, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    args = parser.parse_args(argv)
    settings = common.settings(args, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    corpus = make_corpus(VALUE_SIZE, PER_BATCH, 4 if settings.quick else 16)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-recompression-") as scratch:
        for i, (codec, stored) in enumerate(CASES):
            batches = ours_build(corpus, codec)
            wire = sum(map(len, batches))
            case = Appender(Path(scratch) / f"case-{i}", LogConfig(compression_type=stored), batches)
            peer = Appender(Path(scratch) / f"peer-{i}", LogConfig(), batches)
            try:
                inner, times = measure(case, peer, settings)
            finally:
                case.close()
                peer.close()
            per_pass = [statistics.median(t) / inner for t in times]
            rows.append(
                [
                    codec.name.lower(),
                    stored,
                    f"{wire / per_pass[1] / 1e6:,.0f}",
                    f"{wire / per_pass[0] / 1e6:,.0f}",
                    f"{1 / common.paired_ratio(times[0], times[1]):.1f}x",
                ]
            )
    print("Appending batches to a topic whose compression.type names a codec, against compression.type=producer")
    print(common.machine_line())
    print(f"corpus: {len(corpus)} batches of {PER_BATCH} x {VALUE_SIZE} B JSON events; paired rounds, medians")
    print(
        common.table(
            ["produced", "compression.type", "producer MB/s", "recompressing MB/s", "time/producer"], rows, left=2
        )
    )


if __name__ == "__main__":
    main()
