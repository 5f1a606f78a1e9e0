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

#: The driver JVM's options for a local load whose read tasks write the Parquet themselves
#: (``writer = arrow``): that JVM then only plans, schedules tasks and moves file lists, and its
#: optimising compiler (C2) cost more CPU than it saved in a load of seconds to minutes. With
#: the client compiler alone, bench_loader measured the JVM's CPU in the read phase at 2.4-2.7
#: CPU-s instead of 4.3-7.8, and the session's start at 4.5 CPU-s instead of 8-9
#: (docs/benchmarks.md, Loader). Not for Spark's own writer, whose JVM does the writing.
LIGHT_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
#: The Python daemon of a local session's workers: pyspark's, importing the installed pyspark
#: rather than compiling it from Spark's zip anew in every load (loader/daemon.py).
LOCAL_DAEMON_MODULE = "tributary.loader.daemon"


def start_session(master: str | None, *, light_driver: bool = False) -> SparkSession:
    """A session on ``master``; without one, spark-submit's master if it gave one, else local[*].
    ``light_driver``: a local session's JVM runs without its optimising compiler (see
    :data:`LIGHT_DRIVER_JAVA_OPTIONS`), unless ``spark.driver.extraJavaOptions`` is set."""
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
    local = (master if master is not None else conf.get("spark.master", "")).startswith("local")
    if light_driver and local and not conf.contains("spark.driver.extraJavaOptions"):
        builder = builder.config("spark.driver.extraJavaOptions", LIGHT_DRIVER_JAVA_OPTIONS)
    if local and not conf.contains("spark.python.daemon.module"):
        builder = builder.config("spark.python.daemon.module", LOCAL_DAEMON_MODULE)
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
