"""`vastui ssh-key add|list`, and the check a campaign makes before its first rent: is the SSH key this machine
will log in with registered on the account? (part of the composition root: only vastui/cli/ prints)

A rented host accepts only the account's registered keys. Without that check a fresh account rents every candidate
and loses each one to "refused our SSH key" after its readiness wait — paid for, measured nothing.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vastui.approval import Action, Approval, ApprovalRequest, Approver
from vastui.cli.terminal import add_connection_args, ask_on_terminal, make_table, print_table, vast_client
from vastui.errors import ApiError, ConfigError

if TYPE_CHECKING:
    from vastui.remote.local_keys import LocalPublicKey
    from vastui.vast.client import HttpVastClient
    from vastui.vast.models import SshKey

ADD_HELP = """\
Register an SSH public key on the Vast.ai account, so that instances rented from now on accept it (a campaign
refuses to rent while the key it would log in with is not registered). PATH is a public key file (.pub); without
it, the key `vastui campaign run` would use: --ssh-key's .pub, else ~/.ssh/id_ed25519.pub, else the ssh-agent's key.
The key's fingerprint is shown and nothing is sent without a y at the prompt (or --yes). A private key file is
refused and never printed."""


def add_ssh_key_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``ssh-key add`` and ``ssh-key list``."""
    parser = sub.add_parser("ssh-key", help="register SSH public keys on the account")
    actions = parser.add_subparsers(dest="ssh_key_command", metavar="ACTION")
    parser.set_defaults(handler=lambda _args: _help(parser))
    add = actions.add_parser("add", help="register a public key on the account, after approval",
                             description=ADD_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add.add_argument("path", nargs="?", type=Path, metavar="PATH",
                     help="public key file, e.g. ~/.ssh/id_ed25519.pub (default: the key campaigns use)")
    add_connection_args(add)
    add.add_argument("--ssh-key", help="without PATH: the private key campaigns use; its .pub is registered")
    add.add_argument("--yes", action="store_true", help="approve registering this key without a prompt (scripts)")
    add.set_defaults(handler=_cmd_add)
    listing = actions.add_parser("list", help="the public keys registered on the account")
    add_connection_args(listing)
    listing.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    listing.set_defaults(handler=_cmd_list)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def add_command(key: LocalPublicKey, *, url: str | None = None) -> str:
    """The command that registers ``key`` (with this run's ``--url``; never its API key)."""
    command = ["vastui", "ssh-key", "add"] + ([str(key.path)] if key.path is not None else [])
    return shlex.join(command + (["--url", url] if url else []))


async def local_keys(*, key_path: Path | None) -> list[LocalPublicKey]:
    """The public keys the SSH runner will offer; ConfigError (naming what to create) when there are none."""
    from vastui.remote.local_keys import public_half, runner_public_keys

    keys = await runner_public_keys(key_path=key_path, home=Path.home())
    if keys:
        return keys
    if key_path is not None:
        pub = public_half(key_path)
        raise ConfigError(f"no public key next to {key_path}: write it with `ssh-keygen -y -f {key_path} > {pub}`, "
                          f"then register it with `vastui ssh-key add {pub}`", title="No SSH public key")
    raise ConfigError("no SSH key on this machine (no --ssh-key, no ~/.ssh/id_ed25519, no ssh-agent key): create one "
                      "with `ssh-keygen -t ed25519`, then register it with `vastui ssh-key add`",
                      title="No SSH key")


def approval_request(key: LocalPublicKey) -> ApprovalRequest:
    """What registering ``key`` asks the operator: its fingerprint, comment and where it was read."""
    from vastui.vast.client import ssh_key_target

    comment = f" ({key.comment})" if key.comment else ""
    return ApprovalRequest(action=Action.CREATE_SSH_KEY, target=ssh_key_target(key.text),
                           summary=f"Register the SSH public key {key.fingerprint}{comment} from {key.source} on "
                                   "the account (hosts rented from now on accept it)")


async def register_key(client: HttpVastClient, key: LocalPublicKey, *, approver: Approver) -> bool:
    """Ask ``approver``; register ``key`` only when approved. False (nothing sent) when declined."""
    approval = await approver.request(approval_request(key))
    if approval is None:
        return False
    try:
        await client.create_ssh_key(key.text, approval=approval)
    except ApiError as exc:
        if exc.code == "team_ssh_keys_not_supported":
            raise ApiError(f"this API key belongs to a team, and team accounts take no SSH keys: register "
                           f"{key.source} with a personal API key", status=exc.status, code=exc.code,
                           title="Team SSH keys not supported") from exc
        raise
    return True


def find_registered(local: Sequence[LocalPublicKey], account: Sequence[SshKey]) -> LocalPublicKey | None:
    """The first local key that is registered on the account (compared as sshd compares keys), or None."""
    return next((key for key in local if any(r.matches(key.text) for r in account)), None)


async def require_registered_key(client: HttpVastClient, *, key_path: Path | None, approver: Approver | None,
                                 url: str | None) -> None:
    """Before a campaign's first rent: pass when a key the runner will offer is registered on the account;
    otherwise register one after ``approver`` approves, or raise ConfigError — one line naming the key file and
    the command that fixes it — when there is no ``approver`` (no terminal) or it declines. Nothing is rented
    either way."""
    local = await local_keys(key_path=key_path)
    if find_registered(local, await client.list_ssh_keys()) is not None:
        return
    key = next((k for k in local if k.path is not None), local[0])
    unregistered = (f"the SSH key {key.source} ({key.fingerprint}) is not registered on the Vast.ai account, so no "
                    f"rented host would accept it")
    if approver is None:
        raise ConfigError(f"{unregistered}; nothing was rented. Register it with: {add_command(key, url=url)}",
                          title="SSH key not registered")
    if not await register_key(client, key, approver=approver):
        raise ConfigError(f"{unregistered}, and registering it was declined; nothing was rented",
                          title="SSH key not registered")


def _approver(args: argparse.Namespace, key: LocalPublicKey) -> Approver:
    from vastui.campaign.approvers import PromptApprover
    from vastui.clock import WallClock

    if args.yes:
        return _FlagApprover(approval_request(key).target)
    if sys.stdin.isatty():
        return PromptApprover(ask_on_terminal, clock=WallClock())
    raise ConfigError(f"no terminal to ask for approval: pass --yes to register {key.source} ({key.fingerprint})",
                      title="Not approved")


class _FlagApprover:
    """``--yes``: approves registering the one key the command showed, nothing else."""

    def __init__(self, target: str) -> None:
        self._target = target

    async def request(self, request: ApprovalRequest) -> Approval | None:
        import time

        if request.action is not Action.CREATE_SSH_KEY or request.target != self._target:
            return None
        return Approval(request, granted_by="--yes flag", granted_at=time.time())


async def _cmd_add(args: argparse.Namespace) -> int:
    from vastui.config import load_settings
    from vastui.remote.local_keys import read_public_key_file

    if args.path is not None:
        key = read_public_key_file(args.path.expanduser())
    else:
        settings = load_settings(url=args.url, api_key=args.api_key, ssh_key=args.ssh_key)
        local = await local_keys(key_path=settings.ssh_key_path)
        key = next((k for k in local if k.path is not None), local[0])
    async with vast_client(args) as client:
        if find_registered([key], await client.list_ssh_keys()) is not None:
            print(f"already registered: {key.fingerprint} from {key.source}")
            return 0
        if not await register_key(client, key, approver=_approver(args, key)):
            print(f"vastui: not registered: {key.fingerprint} from {key.source} (declined)", file=sys.stderr)
            return 1
    print(f"registered: {key.fingerprint}{f' ({key.comment})' if key.comment else ''} from {key.source}")
    return 0


async def _cmd_list(args: argparse.Namespace) -> int:
    import dataclasses
    import datetime as dt
    import json

    async with vast_client(args) as client:
        keys = await client.list_ssh_keys()
    if args.json:
        print(json.dumps([dataclasses.asdict(key) for key in keys], indent=1))
        return 0
    table = make_table(f"{len(keys)} SSH keys on the account", "id", "type<", "key<", "comment<", "added (UTC)<")
    for key in keys:
        words = key.public_key.split()
        added = (dt.datetime.fromtimestamp(key.created_at, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")
                 if key.created_at is not None else "-")
        data = words[1] if len(words) > 1 else ""
        table.add_row(str(key.id), words[0] if words else "-", f"{data[:12]}…{data[-8:]}" if data else "-",
                      " ".join(words[2:]) or "-", added)
    print_table(table)
    return 0
