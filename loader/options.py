"""The loader's settings: command-line flags, an optional TOML file, defaults.

Every flag is also a key of the TOML file, spelled like the flag without its
dashes (``max-records-per-task = 500000``; ``max_records_per_task`` is read the
same). A flag given on the command line wins over the file. Bad settings stop
the run before Spark starts, with one line naming the setting.

The aggregate cluster's security (TLS, SASL) takes Kafka's client names: a ``[security]``
table in the file, or ``--command-config FILE`` (a properties file, as Kafka's tools take;
TOML when it ends in ``.toml``), which wins. The settings travel to the Spark executors with
each task (certificate and key files must be readable at the same paths there).
"""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tributary.client.security.settings import (
    PLAINTEXT,
    SecurityConfig,
    SecuritySettingsError,
    load_command_config,
    security_from_settings,
)
from tributary.loader.errors import LoadError

DEFAULT_MASTER = "local[*]"
DEFAULT_MAX_RECORDS_PER_TASK = 1_000_000
DEFAULT_TARGET_FILE_BYTES = 128 * 1024 * 1024
#: Seconds a loader that stopped renewing its lease keeps the warehouse (see lease.py).
DEFAULT_LEASE_TIMEOUT_S = 120.0
#: Who writes the Parquet files (stage.py): the read tasks with pyarrow, Spark's own writer, or
#: ``auto``: pyarrow for file:// outputs, Spark's writer for the others.
WRITERS = ("auto", "arrow", "spark")


@dataclass(frozen=True, slots=True)
class LoadOptions:
    bootstrap: str
    output: str
    topics: str = ".*"
    #: None: the master Spark was launched with (spark-submit), else local[*].
    master: str | None = None
    max_records_per_task: int = DEFAULT_MAX_RECORDS_PER_TASK
    allow_gaps: bool = False
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    summary_json: Path | None = None
    metrics_file: Path | None = None
    lease_timeout: float = DEFAULT_LEASE_TIMEOUT_S
    writer: str = "auto"
    #: TLS and SASL to the aggregate cluster ([security] or --command-config).
    security: SecurityConfig = PLAINTEXT

    @property
    def topic_pattern(self) -> re.Pattern[str]:
        return re.compile(self.topics)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``tributary load`` (also used by ``python -m loader`` under spark-submit)."""
    parser.add_argument("--bootstrap", metavar="BOOTSTRAP", help="host:port[,host:port...] of the aggregate cluster")
    parser.add_argument(
        "--output", metavar="URI", help="Hadoop FileSystem URI of the warehouse (hdfs://..., file://...)"
    )
    parser.add_argument("--topics", metavar="REGEX", help="load the topics this regex matches in full (default: all)")
    parser.add_argument("--master", metavar="URL", help=f"Spark master (default: {DEFAULT_MASTER}, or spark-submit's)")
    parser.add_argument(
        "--max-records-per-task",
        metavar="N",
        type=int,
        help=f"split partitions into ranges of at most N records (default: {DEFAULT_MAX_RECORDS_PER_TASK})",
    )
    parser.add_argument(
        "--allow-gaps",
        action="store_const",
        const=True,
        help="load what is left when retention deleted unloaded records, recording the lost ranges",
    )
    parser.add_argument(
        "--target-file-bytes",
        metavar="N",
        type=int,
        help=f"size Parquet files toward N bytes (default: {DEFAULT_TARGET_FILE_BYTES})",
    )
    parser.add_argument("--summary-json", metavar="PATH", type=Path, help="also write the run's summary as JSON here")
    parser.add_argument(
        "--metrics-file", metavar="PATH", type=Path, help="write the run's metrics here (node_exporter textfile format)"
    )
    parser.add_argument(
        "--lease-timeout",
        metavar="SECONDS",
        type=float,
        help="a load that stopped renewing its lease on the warehouse loses it after this long "
        f"(default: {DEFAULT_LEASE_TIMEOUT_S:.0f})",
    )
    parser.add_argument(
        "--writer",
        choices=WRITERS,
        help="who writes the Parquet: the read tasks with pyarrow (arrow), Spark's writer (spark), or auto "
        "(default: arrow for file:// outputs, spark for the others)",
    )
    parser.add_argument("--config", metavar="FILE.toml", type=Path, help="TOML file with any of these settings")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        type=Path,
        help="the aggregate cluster's security settings (security.protocol, sasl.*, ssl.*) in a properties file "
        "(TOML when it ends in .toml); replaces [security] of --config",
    )
    parser.add_argument(
        "--package",
        metavar="FILE.zip",
        type=Path,
        help="only write the tributary package as one archive for Spark executors (spark-submit --py-files), then exit",
    )


_KEYS = (
    "bootstrap",
    "output",
    "topics",
    "master",
    "max-records-per-task",
    "allow-gaps",
    "target-file-bytes",
    "summary-json",
    "metrics-file",
    "lease-timeout",
    "writer",
    "command-config",
)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError:
        raise LoadError(f"setting 'config': file {path} does not exist") from None
    except OSError as exc:
        raise LoadError(f"setting 'config': cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LoadError(f"setting 'config': {path} is not valid TOML: {exc}") from None
    security = table.pop("security", None)
    settings = {key.replace("_", "-"): value for key, value in table.items()}
    if security is not None:
        if not isinstance(security, dict):
            raise LoadError("setting 'security' must be a table ([security]) of Kafka client settings")
        try:
            settings["security"] = security_from_settings(_flatten(security), base=path.parent)
        except SecuritySettingsError as exc:
            raise LoadError(f"[security] in {path}: {exc}") from None
    if isinstance(settings.get("command-config"), str):
        settings["command-config"] = path.parent / settings["command-config"]
    # Relative paths in the file mean paths next to the file.
    for key in ("summary-json", "metrics-file"):
        if isinstance(settings.get(key), str):
            settings[key] = path.parent / settings[key]
    return settings


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _security(settings: Mapping[str, Any]) -> SecurityConfig:
    path = settings.get("command-config")
    if path is not None:
        try:
            return load_command_config(Path(path))
        except SecuritySettingsError as exc:
            raise LoadError(f"setting 'command-config': {exc}") from None
    security = settings.get("security", PLAINTEXT)
    assert isinstance(security, SecurityConfig)
    return security


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LoadError(f"setting '{name}' must be a non-empty string, got {value!r}")
    return value.strip()


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LoadError(f"setting '{name}' must be a positive integer, got {value!r}")
    return value


def _positive_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise LoadError(f"setting '{name}' must be a positive number of seconds, got {value!r}")
    return float(value)


def normalize_output(uri: str) -> str:
    """A Hadoop FileSystem URI for the warehouse; an absolute local path becomes ``file://``."""
    if uri.startswith("/"):
        return "file://" + uri.rstrip("/")
    parsed = urlparse(uri)
    if not parsed.scheme or len(parsed.scheme) == 1:
        raise LoadError(f"setting 'output' must be a Hadoop FileSystem URI (hdfs://..., file:///...), got {uri!r}")
    return uri.rstrip("/") if parsed.path not in ("", "/") else uri


def load_options(flags: Mapping[str, Any], config_file: Path | None = None) -> LoadOptions:
    """Merge the TOML file (if any) and the flags (which win) into checked options."""
    settings: dict[str, Any] = _read_toml(config_file) if config_file is not None else {}
    settings.update({key: value for key, value in flags.items() if value is not None})
    unknown = sorted(set(settings) - set(_KEYS) - {"security"})
    if unknown:
        raise LoadError(f"unknown setting '{unknown[0]}' (known: {', '.join(_KEYS)})")
    for name in ("bootstrap", "output"):
        if name not in settings:
            raise LoadError(f"setting '{name}' is missing (give --{name} or '{name} = ...' in the config file)")
    topics = _str("topics", settings.get("topics", ".*"))
    try:
        re.compile(topics)
    except re.error as exc:
        raise LoadError(f"setting 'topics' is not a valid regex ({topics!r}): {exc}") from None
    allow_gaps = settings.get("allow-gaps", False)
    if not isinstance(allow_gaps, bool):
        raise LoadError(f"setting 'allow-gaps' must be true or false, got {allow_gaps!r}")
    writer = settings.get("writer", "auto")
    if writer not in WRITERS:
        raise LoadError(f"setting 'writer' must be one of {', '.join(WRITERS)}, got {writer!r}")
    paths = {key: settings.get(key) for key in ("summary-json", "metrics-file")}
    for key, value in paths.items():
        if value is not None and not isinstance(value, str | Path):
            raise LoadError(f"setting '{key}' must be a path, got {value!r}")
    return LoadOptions(
        bootstrap=_str("bootstrap", settings["bootstrap"]),
        output=normalize_output(_str("output", settings["output"])),
        topics=topics,
        master=_str("master", settings["master"]) if "master" in settings else None,
        max_records_per_task=_positive_int(
            "max-records-per-task", settings.get("max-records-per-task", DEFAULT_MAX_RECORDS_PER_TASK)
        ),
        allow_gaps=allow_gaps,
        target_file_bytes=_positive_int(
            "target-file-bytes", settings.get("target-file-bytes", DEFAULT_TARGET_FILE_BYTES)
        ),
        summary_json=Path(paths["summary-json"]) if paths["summary-json"] is not None else None,
        metrics_file=Path(paths["metrics-file"]) if paths["metrics-file"] is not None else None,
        lease_timeout=_positive_seconds("lease-timeout", settings.get("lease-timeout", DEFAULT_LEASE_TIMEOUT_S)),
        writer=writer,
        security=_security(settings),
    )
