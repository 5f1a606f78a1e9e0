"""The mirror's settings (mirror.config), its topic filter (mirror.naming) and how
`tributary mirror` reports bad configuration: one line on stderr, a non-zero exit."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tributary.mirror.config import DEFAULT_OFFSETS_TOPIC, MirrorConfig, MirrorConfigError, load_config
from tributary.mirror.naming import TopicFilter, aggregate_topic, source_of
from tributary.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
#: A valid file's required keys; the cases below add one bad line each.
BASE = 'source = "s:1"\nsource-alias = "e"\ntarget = "t:1"\n'
REQUIRED = {"source": "east-1:9092", "source_alias": "east", "target": "agg-1:9092"}


def toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mirror.toml"
    path.write_text(text)
    return path


# --- load_config ---------------------------------------------------------------------------------


def test_toml_keys_with_dashes_and_underscores(tmp_path: Path) -> None:
    path = toml(tmp_path, """
source = "east-1:9092,east-2:9092"
source-alias = "east"
target = "agg-1:9092"
topics = "page.*"
exclude = "page-test"
fetch_max_bytes = 1000000
fetch-partition-max-bytes = 500000
max-inflight-bytes = 2000000
bandwidth-bytes-per-second = 1048576
known-aliases = ["west", "north"]
start_position = "latest"
metrics-port = 9400
""")  # fmt: skip
    config = load_config({}, path)
    assert config.source == "east-1:9092,east-2:9092"
    assert config.source_alias == "east"
    assert config.target == "agg-1:9092"
    assert config.include_pattern.pattern == "page.*"
    assert config.exclude_pattern is not None and config.exclude_pattern.pattern == "page-test"
    assert (config.fetch_max_bytes, config.fetch_partition_max_bytes) == (1_000_000, 500_000)
    assert config.max_inflight_bytes == 2_000_000
    assert config.bandwidth_bytes_per_second == 1_048_576
    assert config.known_aliases == ("west", "north")
    assert config.start_position == "latest"
    assert config.metrics_port == 9400
    assert config.group == "tributary-mirror-east", "the default group is named after the alias"
    assert config.offsets_topic == DEFAULT_OFFSETS_TOPIC


def test_kafka_spellings_with_dots(tmp_path: Path) -> None:
    """Kafka's names: a dotted TOML key (tables inside tables, for TOML) or a quoted one."""
    path = toml(tmp_path, BASE + """
socket.receive.buffer.bytes = 4194304
"socket.send.buffer.bytes" = 1048576
fetch.max.bytes = 1000000
max.inflight.batches.per.partition = 3
""")  # fmt: skip
    config = load_config({}, path)
    assert (config.socket_receive_buffer_bytes, config.socket_send_buffer_bytes) == (4_194_304, 1_048_576)
    assert config.fetch_max_bytes == 1_000_000
    assert config.max_inflight_batches_per_partition == 3
    with pytest.raises(MirrorConfigError, match=re.escape("unknown setting 'socket.receive.buffer.byte'")):
        load_config({}, toml(tmp_path, BASE + "socket.receive.buffer.byte = 1\n"))


def test_mirror_table_is_accepted(tmp_path: Path) -> None:
    path = toml(tmp_path, '[mirror]\nsource = "s:1"\nsource-alias = "west"\ntarget = "t:1"\ngroup = "g"\n')
    config = load_config({}, path)
    assert (config.source, config.source_alias, config.target, config.group) == ("s:1", "west", "t:1", "g")


def test_flags_win_over_the_file_and_absent_flags_do_not(tmp_path: Path) -> None:
    path = toml(tmp_path, 'source = "s:1"\nsource-alias = "east"\ntarget = "t:1"\ntopics = "a.*"\n'
                          "commit-interval-ms = 5000\n")  # fmt: skip
    flags: dict[str, Any] = {"source_alias": "west", "commit_interval_ms": 200, "topics": None, "group": None}
    config = load_config(flags, path)
    assert config.source_alias == "west"
    assert config.commit_interval_ms == 200
    assert config.include_pattern.pattern == "a.*", "a flag not given (None) leaves the file's value"
    assert config.group == "tributary-mirror-west"


def test_flags_alone() -> None:
    config = load_config({**REQUIRED, "known_aliases": "west, north", "exclude": "x"})
    assert config.known_aliases == ("west", "north")
    assert config.exclude_pattern is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BASE + 'fetch-max-byte = 5\n', "unknown setting 'fetch-max-byte'"),
        (BASE + 'fetch-max-bytes = "big"\n', "fetch-max-bytes must be an integer"),
        (BASE + 'fetch-max-bytes = true\n', "fetch-max-bytes must be an integer"),
        (BASE + 'fetch-max-bytes = 0\n', "fetch-max-bytes must be positive"),
        (BASE + 'commit-interval-ms = -5\n', "commit-interval-ms must be positive"),
        (BASE + 'metrics-port = 70000\n', "not a port number"),
        (BASE + 'bandwidth-bytes-per-second = 0\n', "bandwidth-bytes-per-second must be positive"),
        (BASE + 'max-inflight-bytes = 1000\n', "at least fetch-partition-max-bytes"),
        (BASE + 'known-aliases = [1, 2]\n', "must be a list of strings"),
        (BASE + 'start-position = "middle"\n', "earliest' or 'latest"),
        (BASE + 'max-inflight-batches-per-partition = 6\n', "at most 5"),
        (BASE + 'fetch-windows = 0\n', "fetch-windows must be positive"),
        ('source = "s:1"\nsource-alias = "e.x"\ntarget = "t:1"\n', "no dots"),
        (BASE + 'known-aliases = ["a.b"]\n', "no dots"),
        (BASE + 'topics = "(unclosed"\n', "not a valid regular expression"),
        (BASE + 'exclude = "*x"\n', "--exclude '*x' is not a valid"),
        ('source-alias = "e"\ntarget = "t:1"\n', "--source is required"),
        ('source = "s:1"\ntarget = "t:1"\n', "--source-alias is required"),
        ('source = "s:1"\nsource-alias = "e"\n', "--target is required"),
        ("source = \n", "is not valid TOML"),
    ],
)  # fmt: skip
def test_bad_configuration(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(MirrorConfigError, match=re.escape(message)):
        load_config({}, toml(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MirrorConfigError, match="cannot read"):
        load_config(REQUIRED, tmp_path / "absent.toml")


def test_empty_alias_and_source_are_refused() -> None:
    with pytest.raises(MirrorConfigError, match="alias"):
        MirrorConfig(source="s:1", source_alias="", target="t:1")
    with pytest.raises(MirrorConfigError, match="--source"):
        MirrorConfig(source="", source_alias="e", target="t:1")


# --- the topic filter ------------------------------------------------------------------------------


def test_aggregate_names() -> None:
    assert aggregate_topic("east", "page.views") == "east.page.views"
    assert source_of("east.page.views") == ("east", "page.views")
    assert source_of("plain") is None
    assert source_of(".x") is None


def test_internal_topics_are_never_mirrored() -> None:
    f = TopicFilter("east", re.compile(".*"))
    for topic in ("__consumer_offsets", DEFAULT_OFFSETS_TOPIC, "__transaction_state", "__anything"):
        assert not f.mirrored(topic), topic
    assert f.mirrored("_single_underscore")


def test_known_alias_prefixes_are_never_mirrored() -> None:
    """Active-active: east's copy of west's topics, and west's copies, never loop back."""
    f = TopicFilter("east", re.compile(".*"), known_aliases=frozenset({"west", "north"}))
    assert not f.mirrored("east.orders"), "own alias: a copy made by this mirror's twin"
    assert not f.mirrored("west.orders")
    assert not f.mirrored("north.a.b")
    assert f.mirrored("south.orders"), "an unknown prefix is an ordinary topic name"
    assert f.mirrored("westorders")
    assert f.mirrored("orders.west")


def test_include_and_exclude_match_whole_names() -> None:
    f = TopicFilter("east", re.compile("page.*|orders"), re.compile(".*-test"))
    assert f.mirrored("pageviews")
    assert f.mirrored("orders")
    assert not f.mirrored("orders2"), "include must match the whole name"
    assert not f.mirrored("my-orders")
    assert not f.mirrored("page-test")
    assert f.mirrored("page-test-2"), "exclude must match the whole name too"
    assert f.select(["pageviews", "orders", "orders2", "page-test", "__consumer_offsets"]) == {"pageviews", "orders"}


# --- `tributary mirror` on bad configuration ----------------------------------------------------


FLAGS = ["--source", "s:1", "--source-alias", "e", "--target", "t:1"]


def run_mirror(*args: str, timeout: float = 30.0) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "mirror", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return result, time.monotonic() - started


def assert_one_clear_line(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tributary mirror"), lines[0]
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--source", "s:1", "--source-alias", "e.x", "--target", "t:1"], ["'e.x'", "no dots"]),
        ([*FLAGS, "--topics", "(x"], ["--topics", "regular expression"]),
        ([*FLAGS, "--fetch-max-bytes", "0"], ["fetch-max-bytes"]),
    ],
)  # fmt: skip
def test_cli_bad_flags(args: list[str], expected: list[str]) -> None:
    result, _ = run_mirror(*args)
    assert_one_clear_line(result, *expected)


def test_cli_bad_config_file(tmp_path: Path) -> None:
    path = toml(tmp_path, 'source = "s:1"\nsource-alias = "e"\ntarget = "t:1"\nfetch-sessionz = 2\n')
    result, _ = run_mirror("--config", str(path))
    assert_one_clear_line(result, "fetch-sessionz")


def test_cli_not_a_number() -> None:
    """argparse's own message (usage, then the error line): no traceback, exit 2."""
    result, _ = run_mirror(*FLAGS, "--fetch-max-bytes", "x")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--fetch-max-bytes: invalid int value: 'x'" in result.stderr.splitlines()[-1]


def test_cli_unreachable_source() -> None:
    port = free_port()  # nobody listens there
    result, elapsed = run_mirror("--source", f"127.0.0.1:{port}", "--source-alias", "east",
                                 "--target", f"127.0.0.1:{port}")  # fmt: skip
    assert elapsed < 15, f"took {elapsed:.1f} s"
    assert_one_clear_line(result, f"127.0.0.1:{port}")


def test_group_protocol_under_kafkas_names(tmp_path: Path) -> None:
    assert load_config(REQUIRED).group_protocol == "classic"
    path = toml(tmp_path, BASE + 'group.id = "copy-east"\ngroup.protocol = "consumer"\n')
    config = load_config({}, path)
    assert (config.group, config.group_protocol) == ("copy-east", "consumer")
    assert load_config({**REQUIRED, "group_protocol": "consumer"}).group_protocol == "consumer"
    with pytest.raises(MirrorConfigError, match="group-protocol must be 'classic' or 'consumer'"):
        load_config({}, toml(tmp_path, BASE + 'group-protocol = "eager"\n'))
