"""The distribution installs one top-level name, ``tributary``, and ships to Spark executors as one archive.

Built and installed for real: a wheel from a copy of the sources, a fresh virtualenv with that
wheel alone (the project's dependencies reached through a path entry, never its editable install),
and the loader's archive imported by a Python process that has nothing else of Tributary.
"""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.wheel import build_wheel
from tributary.loader.package import build_archive
from tributary.protocol.records import codec as record_codec

PACKAGES = ("protocol", "client", "broker", "mirror", "loader", "deploy")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_one_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        record = next(name for name in archive.namelist() if name.endswith(".dist-info/RECORD"))
        paths = [line.split(",")[0] for line in archive.read(record).decode().splitlines() if line]
    top = {path.split("/")[0] for path in paths if ".dist-info/" not in path}
    assert top == {"tributary"}
    for package in PACKAGES:
        assert f"tributary/{package}/__init__.py" in paths
    assert "tributary/client/raw/batches.py" in paths
    assert "tributary/deploy/cli/__main__.py" in paths
    # setup.py builds the compiled record loops into the wheel wherever this checkout has them.
    compiled = f"tributary/protocol/records/_speedups{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    assert (compiled in paths) == (record_codec.SPEEDUPS is not None)


def test_a_fresh_virtualenv_imports_tributary_and_nothing_else(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    # The dependencies (trio, kazoo, ...) from the project's environment, as a plain path entry:
    # .pth files there (the editable install's finder among them) are not run from it.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    code = (
        "import importlib, tributary.broker, tributary.client, tributary.mirror, tributary.loader.plan\n"
        "print(tributary.broker.__file__)\n"
        "for name in ('broker', 'protocol', 'client', 'mirror', 'loader', 'deploy'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError:\n"
        "        continue\n"
        "    print('IMPORTED', name)\n"
    )
    out = subprocess.run([str(python), "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    assert out.splitlines() == [f"{site}/tributary/broker/__init__.py"]

    command = subprocess.run(
        [str(venv / "bin" / "tributary"), "api-versions", "--output", "json"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    assert '"Produce"' in command.stdout


def test_executors_import_tributary_from_the_loader_archive(tmp_path: Path) -> None:
    archive = tmp_path / "tributary.zip"
    modules = build_archive(archive)
    with zipfile.ZipFile(archive) as opened:
        names = opened.namelist()
    assert len(names) == modules
    assert {name.split("/")[0] for name in names} == {"tributary"}
    assert "tributary/loader/read.py" in names
    assert "tributary/client/blocking.py" in names

    # What an executor does with spark-submit --py-files: the archive first on sys.path.
    code = (
        "import tributary.loader.read, tributary.client.blocking\n"
        "print(tributary.loader.read.__file__)\n"
        "print(tributary.client.blocking.__file__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(archive)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.splitlines() == [f"{archive}/tributary/loader/read.py", f"{archive}/tributary/client/blocking.py"]

    again = tmp_path / "again.zip"
    build_archive(again)
    assert again.read_bytes() == archive.read_bytes()


def test_executors_run_the_compiled_record_loops_from_the_archive(tmp_path: Path) -> None:
    # Python imports no compiled module from a zip: compiled.py copies it out and loads it.
    archive = tmp_path / "tributary.zip"
    build_archive(archive)
    with zipfile.ZipFile(archive) as opened:
        compiled = [n for n in opened.namelist() if n.startswith("tributary/protocol/records/_speedups")]
    if record_codec.SPEEDUPS is None:
        assert compiled == []  # nothing was built here: nothing to ship
        return
    assert compiled == [f"tributary/protocol/records/_speedups{importlib.machinery.EXTENSION_SUFFIXES[0]}"]
    code = (
        "import tributary.protocol.records.codec as c, tributary.protocol.records as r\n"
        "print(c.IMPLEMENTATION, r.__file__)\n"
        "batch = r.build_batch([(b'k', b'v' * 300, (), 1)] * 3)\n"
        "print([len(x.value) for x in r.decode_records(batch)])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(archive)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.splitlines() == [f"compiled {archive}/tributary/protocol/records/__init__.py", "[300, 300, 300]"]


def test_tributary_load_package_writes_the_archive(tmp_path: Path) -> None:
    archive = tmp_path / "executors.zip"
    result = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "load", "--package", str(archive)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"wrote {archive}" in result.stdout
    with zipfile.ZipFile(archive) as opened:
        assert "tributary/loader/__main__.py" in opened.namelist()
