"""The compiled per-record loops (``_speedups.c``), when they were built and are not turned off.

Two loops run once per record and dominate what a broker spends on a produced batch and a
consumer on a fetched one: the walk that checks records against their header before an append
(:mod:`.validate`) and the decode into :class:`~.codec.Record` objects (:mod:`.codec`). The
package builds them as an optional C extension; where it could not be built (no C compiler or
no Python headers) or ``TRIBUTARY_NO_SPEEDUPS`` is set to anything but ``0`` or the empty
string, the pure-Python loops beside them run instead. Both reach the same decision on every
input (tests/protocol/records/test_speedups.py).
"""

from __future__ import annotations

import os
from types import ModuleType

from tributary.protocol.errors import CorruptRecordError

#: Set to turn the compiled loops off (a process reads it once, at import).
DISABLE_VARIABLE = "TRIBUTARY_NO_SPEEDUPS"


def load(record_class: type) -> ModuleType | None:
    """The configured extension module, or None when the Python loops are to run."""
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return None
    try:
        from tributary.protocol.records import _speedups  # noqa: PLC0415 (optional, compiled)
    except ImportError:
        return None
    _speedups.configure(CorruptRecordError, record_class)
    return _speedups
