"""The Spark session of a load."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pyspark import SparkConf
from pyspark.sql import SparkSession

from tributary.loader.hooks import EXECUTOR_ENV
from tributary.loader.options import DEFAULT_MASTER
from tributary.loader.package import build_archive


def start_session(master: str | None) -> SparkSession:
    """A session on ``master``; without one, spark-submit's master if it gave one, else local[*]."""
    conf = SparkConf()
    if master is None and not conf.contains("spark.master"):
        master = DEFAULT_MASTER
    if master is not None and master.startswith("local"):
        # Python workers run this interpreter (and so find client/ and loader/), not
        # whatever python3 is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName("tributary-load")
        .config(conf=conf)
        .config("spark.ui.showConsoleProgress", "true")
        # Event dates and hours are UTC whatever the machine's zone.
        .config("spark.sql.session.timeZone", "UTC")
        # Partition directories are read back as strings (a topic named "2024" stays a name).
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        # Timestamps as Parquet's TIMESTAMP_MICROS (UTC), not the legacy INT96 other readers guess at.
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # No _SUCCESS markers in the staging area: the publish list is the loader's own.
        .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    # Executors in processes of their own get the test hooks' settings (hooks.py) too.
    for name in EXECUTOR_ENV:
        if name in os.environ:
            builder = builder.config(f"spark.executorEnv.{name}", os.environ[name])
    if master is not None:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not (spark.sparkContext.master or "local").startswith("local"):
        _ship_package(spark)
    return spark


def _ship_package(spark: SparkSession) -> None:
    """Executors of a cluster import ``tributary`` from one archive of this very code, first on
    their path: never from whatever else their Python has installed (package.py)."""
    directory = tempfile.mkdtemp(prefix="tributary-load-")
    archive = Path(directory) / "tributary.zip"
    build_archive(archive)
    spark.sparkContext.addPyFile(str(archive))
