"""The coordinator's core is sans-IO: importing it pulls in no trio, no sockets, no kazoo."""

from __future__ import annotations

import subprocess
import sys

CORE = [
    "tributary.broker.group.coordinator",
    "tributary.broker.group.membership",
    "tributary.broker.group.group",
    "tributary.broker.group.offsets",
    "tributary.broker.group.records",
    "tributary.broker.group.timers",
]


def test_core_imports_no_io() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {module}\n" for module in CORE)
        + "print(sorted(m for m in ('trio', 'kazoo', 'socket', 'selectors') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
