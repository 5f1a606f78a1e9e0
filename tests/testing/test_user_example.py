"""docs/testing.md's user test file, run as a user would run it: in a directory of its own, with
the plugin loaded by the file itself, against a ZooKeeper and brokers the kit starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def test_the_documented_user_test_file_passes(tmp_path: Path) -> None:
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert example is not None, "docs/testing.md has no python example"
    (tmp_path / "test_payments.py").write_text(example[1])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_payments.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^2 passed", result.stdout, re.M), result.stdout
