"""The local session's Python daemon (loader/daemon.py): pyspark imported from the installed
package, not compiled anew from Spark's zip, and only where the zip is that package's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark

from tributary.loader.daemon import drop_installed_zip

SITE = Path(pyspark.__file__).resolve().parent.parent
OWN_ZIP = SITE / "pyspark" / "python" / "lib" / "pyspark.zip"
PY4J_ZIP = next((SITE / "pyspark" / "python" / "lib").glob("py4j-*.zip"))


def test_the_installed_pysparks_own_zip_leaves_the_path() -> None:
    assert OWN_ZIP.is_file()
    path = [str(OWN_ZIP), str(PY4J_ZIP), "/somewhere/else", str(SITE)]
    assert drop_installed_zip(path) == [str(PY4J_ZIP), "/somewhere/else", str(SITE)]


def test_another_sparks_zip_stays(tmp_path: Path) -> None:
    # A Spark distribution of its own: its zip is not the installed package's code.
    other = tmp_path / "spark-4" / "python" / "lib" / "pyspark.zip"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"")
    assert drop_installed_zip([str(other), str(SITE)]) == [str(other), str(SITE)]


def test_the_zip_stays_when_its_package_is_not_on_the_path() -> None:
    assert drop_installed_zip([str(OWN_ZIP), "/somewhere/else"]) == [str(OWN_ZIP), "/somewhere/else"]


DRIVER = """
import json, sys
from tributary.loader.session import start_session
spark = start_session("local[1]")
def where(_):
    import pyspark
    return [(pyspark.__file__, sys.argv[0])]
print(json.dumps(spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()))
spark.stop()
"""


def test_a_local_sessions_workers_import_the_installed_pyspark() -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(
        [sys.executable, "-c", DRIVER], check=False, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [(pyspark_file, program)] = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(pyspark_file).resolve() == Path(pyspark.__file__).resolve()
    assert Path(program).resolve() == (Path(__file__).resolve().parents[2] / "loader" / "daemon.py")
