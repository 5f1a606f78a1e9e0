"""``tributary load``: drain the aggregate cluster into Hadoop, exactly once.

    tributary load --bootstrap BOOTSTRAP --output URI [--topics REGEX] [--master URL] [--lease-timeout S]
                   [--max-records-per-task N] [--allow-gaps] [--config FILE.toml]
                   [--target-file-bytes N] [--summary-json PATH] [--metrics-file PATH]

Every flag is also a key of the TOML file; a flag wins over the file. The work
is in the loader package (docs/loader.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from tributary.loader.options import add_arguments


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "load",
        help="load the aggregate cluster into Hadoop (Parquet), exactly once",
        description="Load the aggregate cluster's new records into Parquet files under a Hadoop FileSystem URI, "
        "committing offsets and data together. Every flag is also a key of the TOML config file.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: pyspark and pyarrow take a while to import, and other subcommands need neither.
    from tributary.loader.main import run as run_load  # noqa: PLC0415

    return run_load(args)
