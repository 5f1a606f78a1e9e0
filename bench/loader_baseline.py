"""The loader's peer in bench_loader: the same load by one plain Python process, no Spark.

    python -m bench.loader_baseline --bootstrap HOST:PORT --output DIR [--max-records-per-task N]

It plans the ranges exactly as ``tributary load`` does (the loader's own plan functions on
a fresh warehouse: every partition from its earliest offset, split by the same caps), and reads
and writes each range with the code a Spark task runs (``loader.write.write_range``: the
blocking fetcher, the records decoded into Arrow batches, one zstd Parquet file per directory
``topic=/source_datacenter=/event_date=`` written with pyarrow), into the output directory. So
the two differ by what Spark adds: its JVM, its Python workers, task scheduling, and (with the
``spark`` writer) the JVM's conversion, sort and Parquet encoding; nothing is staged, described
or renamed afterwards here.

Progress lines on stderr mark its phases for the benchmark's CPU sampling ("planned",
"read and written"); a JSON summary goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from tributary.client.blocking import BlockingFetcher
from tributary.loader.options import load_options
from tributary.loader.plan import list_bounds, make_plan, matching_topics, records_per_range
from tributary.loader.write import write_range

log = logging.getLogger("bench.loader_baseline")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--topics", default=".*")
    parser.add_argument("--max-records-per-task", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    flags = {"bootstrap": args.bootstrap, "output": args.output.resolve().as_uri(), "topics": args.topics}
    if args.max_records_per_task is not None:
        flags["max-records-per-task"] = args.max_records_per_task
    options = load_options(flags)
    started = time.monotonic()
    with BlockingFetcher(options.bootstrap) as fetcher:
        topics = matching_topics(fetcher, options.topic_pattern)
        bounds = list_bounds(fetcher, topics)
        caps = records_per_range(
            fetcher, bounds, max_records=options.max_records_per_task, target_bytes=options.target_file_bytes
        )
        plan = make_plan(
            run="1", previous=None, topics=options.topics, committed={}, bounds=bounds, allow_gaps=False,
            max_records_per_range=caps,
        )  # fmt: skip
        log.info("planned %d ranges in %.1f s", len(plan.ranges), time.monotonic() - started)
        started = time.monotonic()
        records = files = 0
        root = args.output.resolve().as_uri()
        for r in plan.ranges:
            written = write_range(fetcher, r, root)
            records += sum(w["rows"] for w in written)
            files += len(written)
        log.info("%d ranges read and written in %.1f s", len(plan.ranges), time.monotonic() - started)
    print(json.dumps({"ranges": len(plan.ranges), "records": records, "files": files}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
