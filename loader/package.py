"""The ``tributary`` package as one archive for Spark executors (``tributary load --package FILE``).

On YARN or a standalone cluster the executors run in Python processes of their own, often
beside other users' code. They import the loader's code as ``tributary`` from this archive,
shipped with ``spark-submit --py-files tributary.zip`` (or ``spark.submit.pyFiles``): Python
imports packages straight from a zip on ``sys.path``. The executors still need the
dependencies (pyarrow, zstandard, crcmod, ...); docs/loader.md shows both ways to give them.

The archive holds the Python sources of the whole namespace, as installed or as checked out
(a checkout's ``tributary/`` links to the folders at the repository root, followed here), with
fixed timestamps and a sorted order, so the same code always gives the same bytes. It also holds
the compiled record loops where they were built (``protocol/records/_speedups*.so``): Python
imports no compiled module from a zip, so ``protocol.records.compiled`` copies it out on the
executor and loads it there when it was built for that executor's Python, else the Python loops
run.
"""

from __future__ import annotations

import importlib.machinery
import os
import zipfile
from pathlib import Path

import tributary

#: Python sources, and compiled modules (the record loops) for this interpreter.
_SUFFIXES = (".py", *importlib.machinery.EXTENSION_SUFFIXES)

#: Zip entries carry this time, so that two builds of the same sources are byte-identical.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _sources(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        found.extend(Path(dirpath) / name for name in sorted(filenames) if name.endswith(_SUFFIXES))
    return found


def build_archive(destination: Path) -> int:
    """Write the archive to ``destination``; returns how many modules it holds."""
    root = Path(tributary.__file__).parent
    sources = _sources(root)
    tmp = destination.with_name(destination.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sources:
            info = zipfile.ZipInfo(f"tributary/{path.relative_to(root).as_posix()}", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    tmp.replace(destination)
    return len(sources)
