"""A wheel of this checkout, for the tests that install Tributary the way an operator does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_wheel(workdir: Path) -> Path:
    """Build from a copy of the sources, so the work tree gets no build/ directory.

    Without build isolation: the test extra pins the setuptools that pyproject.toml asks for,
    so nothing is downloaded."""
    source = workdir / "src"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    # tributary/ links to the package folders beside it: copy the links as links, and their folders.
    # (The compiled record loops are built from their source, as an operator's build does.)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "*.so")
    namespace = ROOT / "tributary"
    shutil.copytree(namespace, source / "tributary", symlinks=True, ignore=ignore)
    for link in sorted(namespace.iterdir()):
        if link.is_symlink():
            folder = link.resolve()
            shutil.copytree(folder, source / folder.name, ignore=ignore)
    wheels = workdir / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
         str(source)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = wheels.glob("tributary-*.whl")
    return wheel
