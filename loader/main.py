"""The ``tributary load`` command's body, shared by ``tributary load`` (deploy/cli/load.py) and
``python -m tributary.loader`` (the script spark-submit runs on YARN or a standalone cluster)."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

from tributary.loader.errors import LoadError
from tributary.loader.job import load
from tributary.loader.options import load_options
from tributary.loader.package import build_archive
from tributary.loader.state import StateError
from tributary.loader.summary import Summary, table, write_reports

PROG = "tributary load"
# The line of a Python worker's traceback (relayed by Spark) that says what went wrong.
_PYTHON_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")


def _explain(exc: BaseException) -> str:
    """One line for an operator: a Spark failure is reduced to the executor's Python error."""
    text = str(exc).strip()
    found = [m for line in text.splitlines() if (m := _PYTHON_ERROR.match(line.strip()))]
    for m in reversed(found):
        if m.group(1) in ("RangeError", "LoadError") or "Kafka" in m.group(1) or "OffsetOutOfRange" in m.group(1):
            return f"{m.group(1)}: {m.group(2)}"
    if found:
        return f"{found[-1].group(1)}: {found[-1].group(2)}"
    return text.splitlines()[0] if text else type(exc).__name__


def _log_phases() -> None:
    """The driver's phase log on stderr (py4j's and Spark's own chatter stays at their levels)."""
    logger = logging.getLogger("tributary.load")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _package(destination: Path) -> int:
    try:
        modules = build_archive(destination)
    except OSError as exc:
        print(f"{PROG}: cannot write the package archive {destination}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {destination} ({modules} modules): ship it with spark-submit --py-files {destination.name}")
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "package", None) is not None:
        return _package(args.package)
    flags = {
        "bootstrap": args.bootstrap,
        "output": args.output,
        "topics": args.topics,
        "master": args.master,
        "max-records-per-task": args.max_records_per_task,
        "allow-gaps": args.allow_gaps,
        "target-file-bytes": args.target_file_bytes,
        "summary-json": args.summary_json,
        "metrics-file": args.metrics_file,
        "lease-timeout": args.lease_timeout,
        "writer": args.writer,
        "command-config": args.command_config,
    }
    try:
        options = load_options(flags, args.config)
    except LoadError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    _log_phases()
    summary = Summary()
    status = 0
    try:
        load(options, summary)
    except (LoadError, StateError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        status = 1
    except Exception as exc:  # Spark and py4j failures: the cause, in one line
        summary.error = _explain(exc)
        print(f"{PROG}: run failed: {summary.error}", file=sys.stderr)
        status = 1
    print(table(summary), flush=True)
    try:
        write_reports(summary, options.summary_json, options.metrics_file)
    except OSError as exc:
        print(f"{PROG}: cannot write the reports: {exc}", file=sys.stderr)
        status = status or 1
    return status
