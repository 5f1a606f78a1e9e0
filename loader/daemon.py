"""Spark's Python daemon for a local load: pyspark's own (``pyspark.daemon``), with pyspark imported
from the installed package rather than from the zip Spark puts first on its workers' path.

Spark starts its Python daemon with ``$SPARK_HOME/python/lib/pyspark.zip`` first on PYTHONPATH,
and Python compiles every module it imports from a zip anew (it keeps no bytecode for them):
importing pyspark's daemon and worker from the zip cost 0.9-1.0 CPU-seconds on the project's
machine, from the installed package's cached bytecode 0.2, and every load's daemon paid it again
(docs/benchmarks.md, Loader). Where the zip belongs to the very pyspark installed on the path
(pip's pyspark: ``SPARK_HOME`` is the package's own folder, the zip inside it), the same code is
on the path twice; this daemon takes the zip off the path, then runs pyspark's daemon, whose
forked workers inherit the path. Any other zip (a Spark distribution of its own) is left where
it is. session.py names this module in ``spark.python.daemon.module`` for local masters, unless
that setting is given.

    python -m tributary.loader.daemon pyspark.worker
"""

from __future__ import annotations

import os
import sys


def drop_installed_zip(path: list[str]) -> list[str]:
    """``path`` without the pyspark.zip of a pyspark package that is itself importable from an
    entry of ``path`` (``<entry>/pyspark/python/lib/pyspark.zip``)."""
    entries = {os.path.realpath(p) for p in path if p}
    kept = []
    for entry in path:
        if os.path.basename(entry) == "pyspark.zip":
            package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(entry))))
            if (
                os.path.basename(package) == "pyspark"
                and os.path.isfile(os.path.join(package, "__init__.py"))
                and os.path.dirname(package) in entries
            ):
                continue
        kept.append(entry)
    return kept


def main() -> None:
    sys.path[:] = drop_installed_zip(sys.path)
    from pyspark import daemon  # noqa: PLC0415 (only after the path is settled)

    daemon.manager()


if __name__ == "__main__":
    main()
