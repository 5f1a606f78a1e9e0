"""The compiled per-record loops (``_speedups.c``), when they were built and are not turned off.

Two loops run once per record and dominate what a broker spends on a produced batch and a
consumer on a fetched one: the walk that checks records against their header before an append
(:mod:`.validate`) and the decode into :class:`~.codec.Record` objects (:mod:`.codec`); a third
encodes the records a producer appends (:mod:`.builder`). The package builds them as an optional
C extension; where it could not be built (no C compiler or no Python headers) or
``TRIBUTARY_NO_SPEEDUPS`` is set to anything but ``0`` or the empty string, the pure-Python
loops beside them run instead. Both reach the same decision on every input
(tests/protocol/test_speedups.py).

Spark executors import the package from one zip archive (``tributary load --package``), and
Python imports no compiled module from a zip: there the module is copied out of the archive
into a private temporary directory and loaded from that file, if the archive holds one built
for this interpreter (its file name says which).
"""

from __future__ import annotations

import atexit
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import tempfile
import zipfile
import zipimport
from types import ModuleType

from tributary.protocol.errors import CorruptRecordError

#: Set to turn the compiled loops off (a process reads it once, at import).
DISABLE_VARIABLE = "TRIBUTARY_NO_SPEEDUPS"
_NAME = "_speedups"


def load(record_class: type) -> ModuleType | None:
    """The configured extension module, or None when the Python loops are to run."""
    module = MODULE
    if module is not None:
        module.configure(CorruptRecordError, record_class)
    return module


def _import() -> ModuleType | None:
    """The extension module as built (not yet configured), or None."""
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return None
    try:
        from tributary.protocol.records import _speedups as module  # noqa: PLC0415 (optional, compiled)
    except ImportError:
        return _from_archive()
    return module


def _from_archive() -> ModuleType | None:
    """The compiled module out of the zip this package was imported from, or None."""
    package = sys.modules[__package__ or ""]
    loader = getattr(package, "__loader__", None)
    if not isinstance(loader, zipimport.zipimporter):
        return None
    # Inside the archive the package's folder is its dotted name ("tributary/protocol/records/").
    folder = (__package__ or "").replace(".", "/") + "/"
    try:
        with zipfile.ZipFile(loader.archive) as archive:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:  # the ABI tags this interpreter loads
                try:
                    data = archive.read(f"{folder}{_NAME}{suffix}")
                except KeyError:
                    continue
                directory = tempfile.mkdtemp(prefix="tributary-speedups-")
                atexit.register(shutil.rmtree, directory, ignore_errors=True)
                path = os.path.join(directory, _NAME + suffix)
                with open(path, "wb") as out:
                    out.write(data)
                spec = importlib.util.spec_from_file_location(f"{__package__}.{_NAME}", path)
                if spec is None or spec.loader is None:
                    return None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
    except (OSError, ImportError, zipfile.BadZipFile):
        return None  # a module that will not load here: the Python loops run
    return None


#: The extension module, imported once; :func:`load` configures it for the record loops, and
#: :mod:`.header` uses its CRC arithmetic, which needs no configuring.
MODULE = _import()
