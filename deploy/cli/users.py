"""``tributary users``: SCRAM users of a cluster, in ZooKeeper (before any broker runs) or online.

    tributary users --zookeeper HOST:PORT[/chroot] set NAME --mechanism SCRAM-SHA-512 --password-file FILE
                    [--iterations N]
    tributary users --zookeeper HOST:PORT[/chroot] delete NAME [--mechanism M]
    tributary users --zookeeper HOST:PORT[/chroot] list [--output table|json]
    tributary users --bootstrap B [--command-config FILE] set|delete|list ...

With ``--zookeeper`` the credential is written straight to ``/config/users/<name>`` with a
change notification, as Kafka's ``kafka-configs --zookeeper`` does: the way to create the first
users (the brokers' own, the admin's) before any broker runs; running brokers pick the change up
within moments. A credential that already matches the password (same iterations) is left as it
is and said so, so that deployment tools can run ``set`` every time and see what changed.
With ``--bootstrap`` it goes through AlterUserScramCredentials and DescribeUserScramCredentials.
The password is read from a file (``-``: standard input), never from the command line; only the
salted keys are stored.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tributary.client.admin.admin import Admin
from tributary.client.admin.users import ScramUpsert, alter_scram_users, describe_scram_users
from tributary.deploy.cli.admin_options import FAILED, USAGE, CommandError, add_common_arguments, run_admin
from tributary.deploy.tables import render_table, to_json
from tributary.deploy.zookeeper_users import ZooKeeperUsersError, ensure_user, set_user, zk_users, zk_write
from tributary.protocol.sasl.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "users",
        help="SCRAM users: set, delete and list credentials (in ZooKeeper, or through a broker)",
        description="SCRAM credentials of a cluster's users, stored as Kafka stores them. --zookeeper writes "
        "ZooKeeper directly (the first users, before any broker runs); --bootstrap uses the Kafka API.",
    )
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="the cluster's ZooKeeper (direct)")
    add_common_arguments(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    put = actions.add_parser("set", help="set (create or replace) a user's credential for a mechanism")
    put.add_argument("name", metavar="NAME")
    put.add_argument("--mechanism", choices=tuple(MECHANISMS), default="SCRAM-SHA-512", help="default SCRAM-SHA-512")
    put.add_argument(
        "--password-file", type=Path, metavar="FILE", required=True, help="file holding the password ('-': stdin)"
    )
    put.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        metavar="N",
        help=f"PBKDF2 iterations, {MIN_ITERATIONS}-{MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})",
    )
    put.set_defaults(func=run_set)

    delete = actions.add_parser("delete", help="delete a user's credential (every mechanism unless one is named)")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--mechanism", choices=tuple(MECHANISMS), help="only this mechanism's credential")
    delete.set_defaults(func=run_delete)

    listing = actions.add_parser("list", help="users and their mechanisms (never the keys)")
    listing.add_argument("names", nargs="*", metavar="NAME", help="only these users")
    listing.set_defaults(func=run_list)

    for action in (put, delete, listing):
        action.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", default=argparse.SUPPRESS)
        add_common_arguments(action, suppress=True)


def _password(path: Path) -> str:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"--password-file: cannot read {path}: {exc.strerror or exc}") from None
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise CommandError(f"--password-file: {path} is empty")
    return password


def _dispatch(args: argparse.Namespace, zookeeper: Any, api: Any) -> int:
    prog = f"tributary users {args.action}"
    if bool(args.zookeeper) == bool(args.bootstrap):
        print(f"{prog}: error: give exactly one of --zookeeper and --bootstrap", file=sys.stderr)
        return USAGE
    if args.zookeeper:
        try:
            return int(zookeeper())
        except CommandError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return exc.status
        except ZooKeeperUsersError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return FAILED
    return run_admin(args, api)


def _check(args: argparse.Namespace) -> None:
    if not args.name:
        raise CommandError("NAME must not be empty")
    if getattr(args, "iterations", MIN_ITERATIONS) < MIN_ITERATIONS or args.iterations > MAX_ITERATIONS:
        raise CommandError(f"--iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")


def _print_users(args: argparse.Namespace, users: list[tuple[str, list[tuple[str, int]]]]) -> int:
    if args.output == "json":
        print(
            to_json([{"user": u, "credentials": [{"mechanism": m, "iterations": i} for m, i in c]} for u, c in users])
        )
    else:
        rows = [(user, ", ".join(f"{m} ({i})" for m, i in creds)) for user, creds in users]
        print(render_table(("user", "credentials (iterations)"), rows))
    return 0


def run_set(args: argparse.Namespace) -> int:
    def zookeeper() -> int:
        _check(args)
        if ensure_user(args.zookeeper, args.name, args.mechanism, _password(args.password_file), args.iterations):
            print(f"set the {args.mechanism} credential of user {args.name!r}")
        else:
            print(f"the {args.mechanism} credential of user {args.name!r} already matches: unchanged")
        return 0

    async def api(admin: Admin) -> int:
        _check(args)
        upsert = ScramUpsert(args.name, args.mechanism, _password(args.password_file), args.iterations)
        error = (await alter_scram_users(admin.cluster, [upsert])).get(args.name)
        if error is not None:
            raise error
        print(f"set the {args.mechanism} credential of user {args.name!r}")
        return 0

    return _dispatch(args, zookeeper, api)


def run_delete(args: argparse.Namespace) -> int:
    mechanisms = [args.mechanism] if args.mechanism else list(MECHANISMS)

    def zookeeper() -> int:
        deleted = [m for m in mechanisms if zk_write(args.zookeeper, args.name, m, None)]
        if not deleted:
            raise CommandError(f"user {args.name!r} has no {' or '.join(mechanisms)} credential", FAILED)
        print(f"deleted the {', '.join(deleted)} credential of user {args.name!r}")
        return 0

    async def api(admin: Admin) -> int:
        users = await describe_scram_users(admin.cluster, [args.name])
        held = {m for user in users for m, _ in user.credentials}
        targets = [m for m in mechanisms if m in held]
        if not targets:
            raise CommandError(f"user {args.name!r} has no {' or '.join(mechanisms)} credential", FAILED)
        error = (await alter_scram_users(admin.cluster, deletions=[(args.name, m) for m in targets])).get(args.name)
        if error is not None:
            raise error
        print(f"deleted the {', '.join(targets)} credential of user {args.name!r}")
        return 0

    return _dispatch(args, zookeeper, api)


def run_list(args: argparse.Namespace) -> int:
    def zookeeper() -> int:
        users = zk_users(args.zookeeper)
        unknown = [n for n in args.names if n not in users]
        if unknown:
            raise CommandError(f"no such user: {', '.join(unknown)}", FAILED)
        chosen = [(u, c) for u, c in sorted(users.items()) if not args.names or u in args.names]
        return _print_users(args, [(u, [(m, cred.iterations) for m, cred in sorted(c.items())]) for u, c in chosen])

    async def api(admin: Admin) -> int:
        users = await describe_scram_users(admin.cluster, args.names or None)
        return _print_users(args, [(u.name, list(u.credentials)) for u in users])

    return _dispatch(args, zookeeper, api)


# set_user stays importable from here: scripts and tests use it.
__all__ = ["register", "set_user"]
