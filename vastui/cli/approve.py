"""`vastui campaign approve` / `refuse`: answer a detached campaign's kept approval requests from a shell (part of
the composition root).

When the operator leaves the console with "Keep for `vastui campaign approve`", the campaign's broker keeps every
request that waits for a human in the store (docs/architecture.md, "Approvals"); these commands list them and answer
them there, and the campaign's process picks the answers up within about a second. Approving asks for a typed yes
at the terminal (the CLI's one confirmation, ``ask_on_terminal``: only y or yes approves) unless ``--yes`` is
given; with no terminal and no ``--yes`` nothing is approved.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from vastui.cli.terminal import ask_on_terminal, fmt_num, make_table, print_table
from vastui.config import load_settings
from vastui.errors import VastuiError
from vastui.store import KeptRequest, RequestState, Store, open_store
from vastui.store.records import CampaignPhase

NOTHING_PENDING = 3

APPROVE_EPILOG = """\
A campaign detached from the console with "Keep for `vastui campaign approve`" keeps the requests that wait for a
human in its store; the campaign's process, still running, picks up the answers given here within about a second.
Each request still expires on the wall clock (15 minutes unless configured): an expired one cannot be approved.

examples:
  vastui campaign approve c1a2b3c4               list what waits: id, action, target, cap, GPU, $/h, age, expiry
  vastui campaign approve c1a2b3c4 r3 r5         approve these two, after a yes typed at the terminal
  vastui campaign approve c1a2b3c4 --all --yes   approve everything pending, no question (a script)
  vastui campaign refuse c1a2b3c4 --all          refuse everything pending (refusing spends nothing: no question)

exit status: 0 listed, or every named request answered; 1 error: unknown or finished campaign, a named request
not pending (already answered, expired or unknown), or the approval not confirmed (no terminal without --yes, or
not yes at the prompt); 2 usage; 3 the campaign has no pending request
"""


def add_approve_commands(csub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``campaign approve`` and ``campaign refuse`` (registered by ``add_campaign_commands``)."""
    for name, helptext in (("approve", "list a detached campaign's pending requests, or approve those named"),
                           ("refuse", "list a detached campaign's pending requests, or refuse those named")):
        p = csub.add_parser(name, help=helptext, epilog=APPROVE_EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("campaign_id", help="the campaign id printed at start and on detach")
        p.add_argument("request_ids", nargs="*", metavar="REQUEST_ID",
                       help=f"the requests to {name}, as listed (e.g. r3); none: list the pending ones")
        p.add_argument("--all", action="store_true", help=f"{name} every pending request of the campaign")
        if name == "approve":
            p.add_argument("--yes", action="store_true",
                           help="approve without the typed confirmation (for scripts; exactly what is named)")
        p.add_argument("--db", help="the store: a SQLite file or a team's postgresql:// URL (default: $VASTUI_DB, "
                                       "config db_path/db_url, or the data dir; detach prints it)")
        p.set_defaults(handler=_cmd_answer, grant=name == "approve")


async def _cmd_answer(args: argparse.Namespace) -> int:
    """``approve`` (``args.grant``) or ``refuse``: list, or answer what is named."""
    verb = "approve" if args.grant else "refuse"
    if args.all and args.request_ids:
        _say(f"vastui campaign {verb}: name request ids or pass --all, not both (see --help)")
        return 2
    settings = load_settings(db_path=args.db)
    if settings.db_url is None and not settings.db_path.exists():
        raise VastuiError(f"there is no vastui database at {settings.db_path}, so no campaign {args.campaign_id} "
                          "(pass the --db that detaching printed)", title="Unknown campaign")
    async with await open_store(settings.db, data_dir=settings.data_dir, operator=settings.operator) as store:
        pending = await _pending(store, args.campaign_id, settings.db_shown)
        if not args.request_ids and not args.all:
            return _list(args.campaign_id, pending)
        if args.all and not pending:
            _say(f"vastui campaign {verb}: campaign {args.campaign_id} has no pending request")
            return NOTHING_PENDING
        chosen = pending if args.all else await _named(store, args.campaign_id, args.request_ids, pending)
        _print_requests(f"to {verb} in campaign {args.campaign_id}", chosen)
        if args.grant and not await _confirmed(args, chosen):
            return 1
        ids = [r.request_id for r in chosen]
        answered = await store.answer_kept_requests(
            campaign_id=args.campaign_id, request_ids=ids, grant=args.grant,
            answered_by=f"{store.writer.short}: vastui campaign {verb} (pid {os.getpid()})", at=time.time(),
            reason=None if args.grant else "refused at the command line")
        owners = await store.campaign_owners()
    done = "approved" if args.grant else "refused"
    if answered:
        print(f"{done}: {', '.join(answered)}; the campaign's process picks the answer up within about a second")
    if args.campaign_id not in owners:
        _say(f"vastui campaign {verb}: warning: no running process holds campaign {args.campaign_id}; nobody may "
             "act on these answers")
    missed = [i for i in ids if i not in answered]
    if missed:
        _say(f"vastui campaign {verb}: not {done}, no longer pending (answered or expired meanwhile): "
             f"{', '.join(missed)}")
        return 1
    return 0


async def _pending(store: Store, campaign_id: str, db_shown: str) -> list[KeptRequest]:
    """The campaign's requests that can still be answered now (pending, not past their expiry)."""
    campaign = await store.campaign(campaign_id)
    if campaign is None:
        raise VastuiError(f"no campaign {campaign_id} in {db_shown} (pass the --db that detaching printed)",
                          title="Unknown campaign")
    if not campaign.is_active:
        phase = "" if campaign.phase == CampaignPhase.FINISHED else f" ({campaign.phase})"
        raise VastuiError(f"campaign {campaign_id} has finished{phase}: its requests can no longer be answered",
                          title="Campaign finished")
    now = time.time()
    return [r for r in await store.kept_requests(campaign_id, state=RequestState.PENDING)
            if not r.is_expired(now)]


async def _named(store: Store, campaign_id: str, request_ids: Sequence[str],
                 pending: list[KeptRequest]) -> list[KeptRequest]:
    """The named pending requests, in the order named; raises naming each one that is not pending, and why."""
    by_id = {r.request_id: r for r in pending}
    if all(i in by_id for i in request_ids):
        return [by_id[i] for i in dict.fromkeys(request_ids)]
    latest = {r.request_id: r for r in await store.kept_requests(campaign_id)}
    now, problems = time.time(), []
    for request_id in dict.fromkeys(request_ids):
        row = latest.get(request_id)
        if request_id in by_id:
            continue
        if row is None:
            problems.append(f"{request_id}: no such request in campaign {campaign_id}")
        elif row.state is RequestState.PENDING:
            problems.append(f"{request_id}: expired {_duration(now - row.expires_at)} ago, unanswered")
        else:
            by = f" by {row.answered_by}" if row.answered_by else ""
            problems.append(f"{request_id}: not pending, already {row.state}{by}")
    raise VastuiError("nothing was answered; " + "; ".join(problems), title="Not pending")


async def _confirmed(args: argparse.Namespace, chosen: list[KeptRequest]) -> bool:
    """``--yes``, or a yes typed at the terminal; without a terminal nothing is approved."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        _say(f"vastui campaign approve: refusing to approve {len(chosen)} request(s): stdin is not a terminal, so "
             "nobody can confirm. Run it in a terminal to be asked, or pass --yes to approve exactly these.")
        return False
    caps = [r.cost_cap_usd for r in chosen if r.cost_cap_usd is not None]
    spend = f", spending at most ${sum(caps):.2f} in all" if caps else ""
    if await ask_on_terminal(f"Approve these {len(chosen)} request(s){spend}?"):
        return True
    _say("vastui campaign approve: not approved; nothing changed")
    return False


def _list(campaign_id: str, pending: list[KeptRequest]) -> int:
    if not pending:
        _say(f"campaign {campaign_id} has no pending request")
        return NOTHING_PENDING
    _print_requests(f"{len(pending)} pending in campaign {campaign_id}", pending)
    print(f"approve: vastui campaign approve {campaign_id} REQUEST_ID... (or --all); "
          f"refuse: vastui campaign refuse {campaign_id} REQUEST_ID... (or --all)")
    return 0


def _print_requests(title: str, requests: list[KeptRequest]) -> None:
    now = time.time()
    table = make_table(title, "id<", "action<", "target<", "summary<~", "cap $", "GPU<", "$/h", "age", "expires in",
                       "asked by<~")
    for r in requests:
        gpu = "-" if r.gpu_name is None else f"{r.num_gpus or 1}x {r.gpu_name}"
        table.add_row(r.request_id, r.action, r.target, r.summary, fmt_num(r.cost_cap_usd, ".2f"), gpu,
                      fmt_num(r.dph_usd, ".3f"), _duration(now - r.asked_at), _duration(r.expires_at - now),
                      r.by.short if r.by is not None else "-")
    print_table(table)


def _duration(seconds: float) -> str:
    """Wall seconds as the console shows them: 42s, 3m05s, 1h02m."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
