"""``tributary mirror``: copy one source cluster into the aggregate, and translate offsets.

    tributary mirror --source BOOTSTRAP --source-alias NAME --target BOOTSTRAP [--topics REGEX]
                     [--exclude REGEX] [--group ID] [--metrics-port N] [--config FILE.toml] [...]
    tributary mirror translate --group G --source BOOTSTRAP --source-alias NAME --target BOOTSTRAP
                     [--apply] [--output table|json]

Every flag is also a key of the TOML file (``source-alias`` or ``source_alias``);
a flag wins over the file. See docs/mirror.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import trio
from prometheus_client import start_http_server

from tributary.client.errors import KafkaError
from tributary.deploy.errors import operator_errors
from tributary.deploy.tables import render_table
from tributary.mirror.config import MirrorConfig, MirrorConfigError, load_config
from tributary.mirror.daemon import Mirror, MirrorStartError
from tributary.mirror.naming import TopicFilter
from tributary.mirror.translate_group import Translated, run_translate

log = logging.getLogger("tributary.mirror")

_INT_FLAGS = (
    ("--fetch-sessions", "fetch requests in flight per source connection (default 4)"),
    ("--fetch-windows", "fetches of one partition in flight, reading ahead on a long link (default 8)"),
    ("--fetch-max-bytes", "bytes per fetch request (default 16 MiB)"),
    ("--fetch-partition-max-bytes", "bytes per partition per fetch (default 2 MiB)"),
    ("--fetch-max-wait-ms", "long-poll time of a fetch (default 250)"),
    ("--max-inflight-bytes", "bytes fetched and not yet acknowledged by the aggregate (default 64 MiB)"),
    ("--max-inflight-requests", "requests in flight per connection (default 16)"),
    (
        "--max-inflight-batches-per-partition",
        "batches of one partition in flight to the aggregate, at most 5 (default 5)",
    ),
    ("--socket-send-buffer-bytes", "SO_SNDBUF of the connections (default: OS autotuning)"),
    ("--socket-receive-buffer-bytes", "SO_RCVBUF of the connections (default: OS autotuning)"),
    ("--bandwidth-bytes-per-second", "cap on bytes fetched from the source per second (default: none)"),
    ("--commit-interval-ms", "how often progress is checkpointed (default 1000)"),
    ("--discovery-interval-ms", "how often new topics and partitions are looked for (default 5000)"),
    ("--session-timeout-ms", "the source group's session timeout (default 10000)"),
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mirror",
        help="mirror a source cluster into the aggregate cluster (or: mirror translate)",
        description="Copy the topics of a source cluster into the aggregate cluster as <alias>.<topic>, batch for "
        "batch, exactly once. 'tributary mirror translate --group G ...' turns a source group's committed offsets "
        "into aggregate offsets. Every flag is also a key of the TOML config file; a flag wins over the file.",
    )
    parser.add_argument("action", nargs="?", choices=("run", "translate"), default="run",
                        help="run the mirror (default) or translate a group's offsets")  # fmt: skip
    parser.add_argument("--source", metavar="BOOTSTRAP", help="bootstrap servers of the source cluster")
    parser.add_argument("--source-alias", metavar="NAME", help="the source's name: prefix of aggregate topics (no dot)")
    parser.add_argument("--target", metavar="BOOTSTRAP", help="bootstrap servers of the aggregate cluster")
    parser.add_argument("--topics", metavar="REGEX", help="source topics to mirror (default: all)")
    parser.add_argument("--exclude", metavar="REGEX", help="source topics not to mirror")
    parser.add_argument(
        "--group", metavar="ID",
        help="run: the mirror's consumer group on the source (default tributary-mirror-<alias>); "
        "translate: the group whose offsets to translate",
    )  # fmt: skip
    parser.add_argument("--metrics-port", metavar="N", type=int, help="serve Prometheus metrics on this port")
    parser.add_argument("--metrics-host", metavar="HOST", help="address of the metrics endpoint (default 127.0.0.1)")
    parser.add_argument("--config", metavar="FILE.toml", type=Path, help="TOML file with any of these settings")
    for side, where in (("source", "the source cluster (often across the WAN)"), ("target", "the aggregate cluster")):
        parser.add_argument(
            f"--{side}-command-config",
            metavar="FILE",
            type=Path,
            help=f"security settings for {where}: security.protocol, sasl.*, ssl.* in a properties file (TOML when it "
            f"ends in .toml); replaces [security.{side}] of --config",
        )
    parser.add_argument("--known-aliases", metavar="A,B", help="aliases of other mirrors, whose copies are never "
                        "mirrored again (active-active)")  # fmt: skip
    parser.add_argument("--group-protocol", choices=("classic", "consumer"),
                        help="the source group's protocol: classic (default) or consumer (KIP-848, "
                        "the source's coordinator assigns)")  # fmt: skip
    parser.add_argument("--start-position", choices=("earliest", "latest"),
                        help="where a partition with no recorded progress starts (default earliest)")  # fmt: skip
    for flag, text in _INT_FLAGS:
        parser.add_argument(flag, metavar="N", type=int, help=text)
    parser.add_argument("--apply", action="store_true", help="translate: commit the result for the group in the "
                        "aggregate (refused while the group is active there)")  # fmt: skip
    parser.add_argument("--output", choices=("table", "json"), default="table", help="translate: output format")
    parser.set_defaults(func=run)


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    names = ["source", "source_alias", "target", "topics", "exclude", "metrics_port", "metrics_host",
             "known_aliases", "start_position", "group_protocol"]  # fmt: skip
    names += [flag[2:].replace("-", "_") for flag, _ in _INT_FLAGS]
    flags = {name: getattr(args, name) for name in names}
    if args.action == "run":
        flags["group"] = args.group
    return flags


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(
            _flags(args),
            args.config,
            {"source": args.source_command_config, "target": args.target_command_config},
        )
    except MirrorConfigError as exc:
        print(f"tributary mirror: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.action == "translate":
        return _translate(args, config)
    return _mirror(config)


async def _mirror_until_signalled(mirror: Mirror) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for signum in signals:
                    log.info("event=signal name=%s: finishing in-flight batches", signal.Signals(signum).name)
                    mirror.stop.set()
                    return

            nursery.start_soon(watch)
            await mirror.run()
            nursery.cancel_scope.cancel()


def _mirror(config: MirrorConfig) -> int:
    mirror = Mirror(config)
    server = None
    if config.metrics_port is not None:
        try:
            server, _thread = start_http_server(config.metrics_port, config.metrics_host, registry=mirror.registry)
        except OSError as exc:
            print(f"tributary mirror: cannot serve metrics on port {config.metrics_port}: {exc.strerror}",
                  file=sys.stderr)  # fmt: skip
            return 2
        log.info("event=metrics_serving url=http://%s:%d/metrics", config.metrics_host, server.server_port)
    try:
        trio.run(_mirror_until_signalled, mirror)
    except (MirrorStartError, KafkaError, BaseExceptionGroup) as exc:
        # Start-up failures and a group membership that failed for good get one line
        # each; anything else is a bug and keeps its traceback.
        errors = operator_errors(exc, (MirrorStartError, KafkaError))
        if errors is None:
            raise
        for error in errors:
            print(f"tributary mirror: {error}", file=sys.stderr)
        return 2 if any(isinstance(e, MirrorStartError) for e in errors) else 1
    finally:
        if server is not None:
            server.shutdown()
    return 0


def _print_translation(results: list[Translated], output: str) -> None:
    if output == "json":
        print(json.dumps([
            {"topic": r.topic, "partition": r.partition, "source_offset": r.source_offset,
             "aggregate_topic": r.aggregate_topic, "aggregate_offset": r.aggregate_offset, "problem": r.problem or None}
            for r in results
        ], indent=2))  # fmt: skip
        return
    rows = [
        (r.topic, r.partition, r.source_offset, r.aggregate_topic,
         r.aggregate_offset if r.aggregate_offset is not None else f"- ({r.problem})")
        for r in results
    ]  # fmt: skip
    print(render_table(("TOPIC", "PARTITION", "SOURCE OFFSET", "AGGREGATE TOPIC", "AGGREGATE OFFSET"), rows))


def _translate(args: argparse.Namespace, config: MirrorConfig) -> int:
    if not args.group:
        print("tributary mirror translate: --group names the group whose offsets to translate", file=sys.stderr)
        return 2
    topic_filter = TopicFilter(config.source_alias, config.include_pattern, config.exclude_pattern,
                               frozenset(config.known_aliases))  # fmt: skip
    try:
        results = trio.run(lambda: run_translate(
            source=config.source, target=config.target, alias=config.source_alias, group=args.group,
            offsets_topic=config.offsets_topic, topic_filter=topic_filter, mirror_group=config.group,
            commit=args.apply, source_security=config.source_security, target_security=config.target_security,
        ))  # fmt: skip
    except (KafkaError, trio.TooSlowError) as exc:
        print(f"tributary mirror translate: {exc or 'no answer in time'}", file=sys.stderr)
        return 1
    _print_translation(results, args.output)
    return 1 if any(r.aggregate_offset is None for r in results) else 0
