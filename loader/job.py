"""One load, from the driver: finish a pending run, plan a new one, read, stage, publish, commit.

The order of a run, and what a crash at each point leaves (the next
invocation sees it in the state directory, see state.py):

1. plan persisted (``plans/<run>.json``), nothing read: the plan is re-used,
   or abandoned if retention has since deleted part of it;
2. ranges read and written to ``staging/<run>/`` by Spark: restaged from scratch;
3. ``publish/<run>.json`` written (staged file -> published name): publishing
   resumes where it stopped, nothing is read again;
4. files renamed into place, then ``manifests/<run>.json`` written;
5. ``offsets/<run>.json`` created exclusively: the commit point. Before it the
   run does not count; after it the next run starts from its offsets.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

from pyspark.sql import SparkSession

from tributary.client.blocking import BlockingFetcher
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError
from tributary.client.security.settings import PLAINTEXT, SecurityConfig
from tributary.loader import hooks
from tributary.loader.errors import LoadError
from tributary.loader.hadoop import FileExists, HadoopFS
from tributary.loader.lease import Lease
from tributary.loader.manifest import build_manifest, by_topic
from tributary.loader.options import LoadOptions
from tributary.loader.plan import Bounds, Plan, list_bounds, make_plan, matching_topics, records_per_range
from tributary.loader.session import start_session
from tributary.loader.stage import StagedFile, describe_staging, resolve_writer, write_staging
from tributary.loader.state import StateStore, run_id
from tributary.loader.summary import Summary, merge_gaps

log = logging.getLogger("tributary.load")


class GapError(LoadError):
    """Retention deleted records that were never loaded, and gaps are not allowed."""

    def __init__(self, message: str, gaps: Sequence[object]) -> None:
        super().__init__(message)
        self.gaps = list(gaps)


def _since(started: float) -> float:
    return time.monotonic() - started


def open_fetcher(bootstrap: str, security: SecurityConfig = PLAINTEXT) -> BlockingFetcher:
    try:
        return BlockingFetcher(bootstrap, ClientConfig(security=security))
    except ValueError as exc:
        raise LoadError(f"setting 'bootstrap': {exc}") from None
    except KafkaError as exc:
        raise LoadError(f"cannot reach the aggregate cluster at {bootstrap}: {exc}") from None


def publish(fs: HadoopFS, files: Sequence[StagedFile]) -> None:
    """Rename every staged file to its published name. Safe to repeat: a file already
    moved is skipped, one published by an earlier attempt is replaced."""
    for n, f in enumerate(files, start=1):
        if fs.exists(f.staged):
            if fs.exists(f.published):
                fs.delete(f.published)
            fs.rename(f.staged, f.published)
        elif not fs.exists(f.published):
            raise LoadError(f"staged file {f.staged} is gone and was never published as {f.published}")
        hooks.reached(f"publish:{n}")


class Loader:
    def __init__(self, options: LoadOptions, spark: SparkSession, fetcher: BlockingFetcher) -> None:
        self.options = options
        self.spark = spark
        self.fetcher = fetcher
        self.fs = HadoopFS(spark, options.output)
        self.state = StateStore(self.fs)
        self.lease = Lease(self.fs, options.lease_timeout)

    def check_output(self) -> None:
        try:
            self.state.check_writable()
        except Exception as exc:  # py4j wraps the JVM's IOException / AccessControlException
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LoadError(f"cannot write to the output {self.options.output}: {first}") from None

    def bounds(self, topics: list[str]) -> Bounds:
        return list_bounds(self.fetcher, topics)

    def plan(self, run: str, previous: str | None, committed: dict[str, dict[int, int]], topics: list[str]) -> Plan:
        bounds = self.bounds(topics)
        pending = {
            t: {p: (max(committed.get(t, {}).get(p, lo), lo), hi) for p, (lo, hi) in parts.items()}
            for t, parts in bounds.items()
        }
        caps = records_per_range(
            self.fetcher,
            pending,
            max_records=self.options.max_records_per_task,
            target_bytes=self.options.target_file_bytes,
        )
        try:
            return make_plan(
                run=run,
                previous=previous,
                topics=self.options.topics,
                committed=committed,
                bounds=bounds,
                allow_gaps=self.options.allow_gaps,
                max_records_per_range=caps,
            )
        except LoadError as exc:
            if "retention deleted" in str(exc):
                # The gaps, for the metrics of the failed run.
                gaps = make_plan(
                    run=run,
                    previous=previous,
                    topics=self.options.topics,
                    committed=committed,
                    bounds=bounds,
                    allow_gaps=True,
                    max_records_per_range=caps,
                ).gaps
                raise GapError(str(exc), gaps) from None
            raise

    def still_readable(self, plan: Plan) -> bool:
        bounds = self.bounds(sorted({r.topic for r in plan.ranges}))
        for r in plan.ranges:
            earliest, latest = bounds.get(r.topic, {}).get(r.partition, (0, -1))
            if r.start < earliest or r.end > latest:
                return False
        return True

    def execute(self, plan: Plan, *, resumed: bool) -> list[StagedFile]:
        """Stage (unless a publish list says it was done), publish, write the manifest, commit."""
        listed = self.state.read_publish_list(plan.run)
        if listed is None:
            staging = self.state.staging_uri(plan.run)
            self.fs.delete(staging, recursive=True)  # what a dead attempt left half-written
            files: list[StagedFile] = []
            if plan.ranges:
                started = time.monotonic()
                writer = resolve_writer(self.options.writer, self.options.output)
                staged = write_staging(
                    self.spark, plan, self.options.bootstrap, staging, self.fs,
                    writer=writer, security=self.options.security,
                )  # fmt: skip
                log.info(
                    "run %s: %d ranges read and staged in %.1f s (%s writer)",
                    plan.run, len(plan.ranges), _since(started), writer,
                )  # fmt: skip
                hooks.reached("staged")
                if staged is None:
                    started = time.monotonic()
                    staged = describe_staging(self.spark, self.fs, staging)
                    log.info("run %s: %d staged files described in %.1f s", plan.run, len(staged), _since(started))
                files = staged
            self.state.write_publish_list(plan.run, [f.to_json() for f in files])
        else:
            files = [StagedFile.from_json(f) for f in listed]
        started = time.monotonic()
        publish(self.fs, files)
        self.state.write_manifest(plan.run, build_manifest(plan, files, self.fs.root, resumed=resumed))
        log.info("run %s: %d files published in %.1f s", plan.run, len(files), _since(started))
        hooks.reached("commit")
        self.lease.check()
        try:
            self.state.commit(plan)
        except FileExists:
            raise LoadError(f"run {plan.run} was committed by someone else: is another loader running?") from None
        log.info("run %s: committed", plan.run)
        hooks.reached("committed")
        self.state.clean_up(plan.run)
        return files

    def run(self, summary: Summary) -> None:
        topics = matching_topics(self.fetcher, self.options.topic_pattern)
        self.check_output()
        self.lease.acquire()
        try:
            self._run(topics, summary)
        finally:
            self.lease.release()

    def _run(self, topics: list[str], summary: Summary) -> None:
        last = self.state.last_commit()
        if last is not None:
            self.state.clean_committed(last.run)
        pending = self.state.pending_run(last.run if last else None)
        if pending is not None:
            plan = self.state.read_plan(pending)
            if plan is not None and (self.state.read_publish_list(pending) is not None or self.still_readable(plan)):
                print(f"tributary load: finishing run {pending}, interrupted before its commit", flush=True)
                self._record(summary, plan, self.execute(plan, resumed=True))
                last = self.state.last_commit()
            else:
                print(f"tributary load: abandoning run {pending}: nothing was published", flush=True)
                self.state.abandon(pending)
        number = int(last.run) + 1 if last else 1
        plan = self.plan(run_id(number), last.run if last else None, last.offsets if last else {}, topics)
        if not plan.ranges and not plan.gaps:
            return
        self.state.save_plan(plan)
        log.info(
            "run %s: planned %d ranges, %d offsets, %d gaps",
            plan.run,
            len(plan.ranges),
            sum(r.end - r.start for r in plan.ranges),
            len(plan.gaps),
        )
        hooks.reached("planned")
        self._record(summary, plan, self.execute(plan, resumed=False))

    @staticmethod
    def _record(summary: Summary, plan: Plan, files: list[StagedFile]) -> None:
        summary.run = plan.run
        summary.runs.append(plan.run)
        summary.add(by_topic(files))
        summary.gaps = merge_gaps(summary.gaps, plan.gaps)


def load(options: LoadOptions, summary: Summary, spark: SparkSession | None = None) -> None:
    """Run a load, filling in ``summary`` (on failure too: ``success`` false, ``error``
    set, the gaps found, the runs committed before it; then the exception propagates)."""
    started = time.monotonic()
    os.environ[hooks.DRIVER_PID_ENV] = str(os.getpid())
    try:
        with open_fetcher(options.bootstrap, options.security) as fetcher:
            # Cheap checks first: a bad bootstrap or an empty match fails before Spark starts.
            matching_topics(fetcher, options.topic_pattern)
            started = time.monotonic()
            light = resolve_writer(options.writer, options.output) == "arrow"
            session = spark if spark is not None else start_session(options.master, light_driver=light)
            log.info("Spark session on %s started in %.1f s", session.sparkContext.master, _since(started))
            Loader(options, session, fetcher).run(summary)
        summary.success = True
    except GapError as exc:
        summary.gaps = merge_gaps(summary.gaps, exc.gaps)
        summary.error = str(exc)
        raise
    except Exception as exc:
        summary.error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise
    finally:
        summary.seconds = time.monotonic() - started
        summary.finished_at = time.time()
