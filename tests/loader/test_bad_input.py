"""Operator errors get one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tributary.testing.cluster import Cluster
from tributary.testing.ports import free_port

from .conftest import create_topics, load_command, run_load, unique


def tributary_load(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tributary load:")]


def test_unreachable_bootstrap_and_bad_settings(tmp_path: Path) -> None:
    result = tributary_load(*load_command(f"127.0.0.1:{free_port()}", tmp_path / "w"))
    assert result.returncode == 1
    (line,) = error_lines(result.stderr)
    assert "cannot reach the aggregate cluster at 127.0.0.1:" in line
    assert "Traceback" not in result.stderr
    bad = tributary_load(*load_command("127.0.0.1:1", tmp_path / "w", "--topics", "("))
    assert bad.returncode == 2 and "not a valid regex" in bad.stderr and "Traceback" not in bad.stderr
    missing = tributary_load(*load_command("127.0.0.1:1", tmp_path / "w", "--config", str(tmp_path / "no.toml")))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_an_empty_match_and_an_unwritable_output(single_broker: Cluster, tmp_path: Path) -> None:
    topic = unique("east.t")
    create_topics(single_broker.bootstrap, [topic], partitions=1)
    empty = tributary_load(*load_command(single_broker.bootstrap, tmp_path / "w", "--topics", "nothing-.*"))
    assert empty.returncode == 1
    (line,) = error_lines(empty.stderr)
    assert "no topic matches --topics 'nothing-.*'" in line and topic in line
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    unwritable = run_load(single_broker.bootstrap, blocker / "warehouse", "--topics", topic)
    assert unwritable.returncode == 1
    (line,) = error_lines(unwritable.stderr)
    assert f"cannot write to the output {(blocker / 'warehouse').as_uri()}" in line
    assert "Traceback" not in unwritable.stderr
