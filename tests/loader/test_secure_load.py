"""The loader reads the aggregate cluster over SASL_SSL (SCRAM-SHA-512 as user ``loader``): the
driver's planner and the Spark executors' blocking fetchers both log in; a wrong password stops
the load before Spark starts, with one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.security import SecureCluster, client_settings, start_secure_cluster, write_command_config
from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot

from .conftest import create_topics, loaded_keys, produce, run_load, unique

FIRST_MS = 1_709_326_800_000  # 2024-03-01 21:00 UTC


@pytest.fixture(scope="module")
def secure(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    yield from start_secure_cluster(server_chroot(zookeeper_server, "secload"), tmp_path_factory.mktemp("secload"))


def test_the_loader_reads_over_sasl_ssl(secure: SecureCluster, tmp_path: Path) -> None:
    tag = unique("")
    topics = [f"east.clicks{tag}", f"west.orders{tag}"]
    create_topics(secure.cluster.bootstrap, topics)
    produced = []
    for topic in topics:
        produced += produce(secure.cluster.bootstrap, topic, 6_000, first_ms=FIRST_MS, step_ms=1000)
    # The security settings as a [security] table of the loader's TOML file.
    settings = client_settings(secure.pki, "scram", "loader")
    lines = "".join(f'"{key}" = "{value}"\n' for key, value in settings.items())
    config = tmp_path / "load.toml"
    config.write_text(f"[security]\n{lines}")
    output = tmp_path / "warehouse"
    result = run_load(secure.bootstrap("scram"), output, "--topics", f".*{tag}", "--config", str(config),
                      "--max-records-per-task", "4000")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert loaded_keys(output) == sorted((p.topic, p.partition, p.offset) for p in produced)


def test_a_wrong_password_stops_the_load_before_spark(secure: SecureCluster, tmp_path: Path) -> None:
    wrong = {**client_settings(secure.pki, "scram", "loader"), "sasl.password": "guess"}
    properties = write_command_config(tmp_path / "loader.properties", wrong)
    result = run_load(secure.bootstrap("scram"), tmp_path / "warehouse", "--command-config", str(properties))
    assert result.returncode != 0
    assert "SASL_AUTHENTICATION_FAILED" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "warehouse").exists()
