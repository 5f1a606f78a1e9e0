"""The state directory ``<output>/_tributary/``: plans, publish lists, manifests, commits.

Layout (one file per run, runs numbered 00000001, 00000002, ...)::

    _tributary/plans/<run>.json       the frozen plan, written before anything is read
    _tributary/staging/<run>/         Parquet files as Spark wrote them
    _tributary/publish/<run>.json     staged file -> published name, written once staging is complete
    _tributary/manifests/<run>.json   what the run published and counted
    _tributary/offsets/<run>.json     the commit: created exclusively, the run's one commit point

A run whose ``offsets/<run>.json`` exists is committed; any other plan is
pending and the next invocation finishes it (rolls it forward) before planning
anew, or abandons it if nothing was published yet and its ranges can no longer
be read (rolls it back). The commit is a function of the plan, so a commit file
cut short by a crash is rewritten from the plan. Underscored names are skipped
by Spark, Hive and pyarrow readers of the warehouse.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from tributary.loader.hadoop import FileExists, HadoopFS
from tributary.loader.plan import Offsets, Plan, offsets_from_json, offsets_to_json

STATE_DIR = "_tributary"
_RUN_FILE = re.compile(r"^(\d{8})\.json$")


def run_id(number: int) -> str:
    return f"{number:08d}"


@dataclass(frozen=True, slots=True)
class Commit:
    run: str
    offsets: Offsets


class StateError(Exception):
    """The state directory holds something the loader cannot make sense of."""


def _dump(data: Any) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


class StateStore:
    def __init__(self, fs: HadoopFS) -> None:
        self.fs = fs

    def _uri(self, *parts: str) -> str:
        return self.fs.uri("/".join((STATE_DIR, *parts)))

    def staging_uri(self, run: str) -> str:
        return self._uri("staging", run)

    def _runs(self, kind: str) -> list[str]:
        names = (_RUN_FILE.match(s.name) for s in self.fs.list_dir(self._uri(kind)) if not s.is_dir)
        return sorted(m.group(1) for m in names if m)

    def _read_json(self, uri: str) -> Any | None:
        """The file's JSON, or None when it is cut short or garbled (a crash while writing it)."""
        try:
            return json.loads(self.fs.read_bytes(uri))
        except (ValueError, UnicodeDecodeError):
            return None

    # --- commits --------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Create the state directory (fails early, with the URI, when the output is not writable)."""
        self.fs.mkdirs(self._uri("offsets"))

    def last_commit(self) -> Commit | None:
        runs = self._runs("offsets")
        if not runs:
            return None
        run = runs[-1]
        data = self._read_json(self._uri("offsets", f"{run}.json"))
        if data is None:
            # Created but cut short: the run is committed (creation is the
            # commit point) and its offsets are those of its plan.
            plan = self.read_plan(run)
            if plan is None:
                raise StateError(f"commit {self._uri('offsets', run + '.json')} is unreadable and its plan is gone")
            self.fs.delete(self._uri("offsets", f"{run}.json"))
            self.commit(plan)
            return Commit(run, plan.end_offsets)
        return Commit(run, offsets_from_json(data["offsets"]))

    def commit(self, plan: Plan) -> None:
        """Create ``offsets/<run>.json``: from here on the run is loaded. FileExists if it was already."""
        self.fs.create_exclusive(
            self._uri("offsets", f"{plan.run}.json"),
            _dump(
                {
                    "run": plan.run,
                    "previous": plan.previous,
                    "committed_at": time.time(),
                    "manifest": f"manifests/{plan.run}.json",
                    "offsets": offsets_to_json(plan.end_offsets),
                }
            ),
        )

    def is_committed(self, run: str) -> bool:
        return self.fs.exists(self._uri("offsets", f"{run}.json"))

    # --- plans ----------------------------------------------------------------------------------

    def read_plan(self, run: str) -> Plan | None:
        uri = self._uri("plans", f"{run}.json")
        if not self.fs.exists(uri):
            return None
        data = self._read_json(uri)
        return Plan.from_json(data) if data is not None else None

    def pending_run(self, last: str | None) -> str | None:
        """The run planned after the last commit, if any (at most one is ever pending)."""
        pending = [r for r in self._runs("plans") if last is None or r > last]
        return pending[0] if pending else None

    def save_plan(self, plan: Plan) -> None:
        try:
            self.fs.create_exclusive(self._uri("plans", f"{plan.run}.json"), _dump(plan.to_json()))
        except FileExists:
            raise StateError(
                f"run {plan.run} was planned by someone else meanwhile: is another loader writing to {self.fs.root}?"
            ) from None

    def abandon(self, run: str) -> None:
        """Roll back a pending run that published nothing: its plan is kept aside, its staging dropped."""
        self.fs.delete(self.staging_uri(run), recursive=True)
        self.fs.delete(self._uri("publish", f"{run}.json"))
        plan = self._uri("plans", f"{run}.json")
        if self.fs.exists(plan):
            self.fs.rename(plan, self._uri("plans", f"{run}.abandoned-{int(time.time() * 1000)}.json"))

    # --- publishing and manifests ---------------------------------------------------------------

    def read_publish_list(self, run: str) -> list[dict[str, Any]] | None:
        uri = self._uri("publish", f"{run}.json")
        if not self.fs.exists(uri):
            return None
        data = self._read_json(uri)
        if data is None:
            raise StateError(f"{uri} is unreadable")  # written to a side file and renamed: never torn
        files: list[dict[str, Any]] = data["files"]
        return files

    def write_publish_list(self, run: str, files: list[dict[str, Any]]) -> None:
        self.fs.write_replace(self._uri("publish", f"{run}.json"), _dump({"run": run, "files": files}))

    def write_manifest(self, run: str, manifest: dict[str, Any]) -> None:
        self.fs.write_replace(self._uri("manifests", f"{run}.json"), _dump(manifest))

    def read_manifest(self, run: str) -> dict[str, Any] | None:
        uri = self._uri("manifests", f"{run}.json")
        data = self._read_json(uri) if self.fs.exists(uri) else None
        return data if isinstance(data, dict) else None

    def clean_committed(self, last: str) -> None:
        """What runs killed after their commit left: staging areas and publish lists up to ``last``."""
        for entry in self.fs.list_dir(self._uri("staging")):
            if entry.is_dir and entry.name.isdigit() and entry.name <= last:
                self.clean_up(entry.name)

    def clean_up(self, run: str) -> None:
        """After the commit: the staging area and the publish list have served."""
        self.fs.delete(self.staging_uri(run), recursive=True)
        self.fs.delete(self._uri("publish", f"{run}.json"))
