"""The campaign commands of the CLI (part of the composition root): demo, campaign plan/run/resume.

One module of the vastui/cli/ package; only that package prints or exits.
"""

from __future__ import annotations

import argparse
import enum
import json
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console

from vastui.bench.manifest import load_manifest
from vastui.bench.receipt import Receipt, render_json, render_markdown
from vastui.campaign.approvers import (
    AuditedApprover,
    OutsidePlanRefuser,
    PlanApprover,
    PlanTerms,
    PromptApprover,
    RefusingApprover,
)
from vastui.campaign.handle import start_campaign
from vastui.campaign.plan import render_plan
from vastui.campaign.session import CampaignServices, new_campaign_id, plan_campaign, resume_campaign
from vastui.cli.signals import run_async, watch_for_exit
from vastui.cli.sim import require_simulator
from vastui.cli.terminal import add_connection_args, ask_on_terminal, held_while_asking, positive_number
from vastui.clock import Clock, MarketClock
from vastui.config import Redactor, Settings, ensure_folder, load_settings, without_password
from vastui.errors import ConfigError
from vastui.events import (
    BlockMeasured,
    CampaignFinished,
    CandidateEliminated,
    CandidatePhaseChanged,
    DecisionMade,
    Event,
    EventBus,
    InstanceConfirmedGone,
    InstanceRented,
    Notice,
)
from vastui.events_live import (
    AbortRequested,
    ApprovalAnswered,
    ApprovalCancelled,
    ApprovalExpired,
    CampaignPhaseChanged,
)
from vastui.remote.runner import SshRunner
from vastui.store import Store, open_store
from vastui.store.records import CampaignPhase
from vastui.vast.client import HttpVastClient
from vastui.vast.query import parse_query

NO_TTY = ("no terminal to ask for approvals: pass --approve-plan to approve exactly the printed plan "
          "(rent these offers, spend at most the budget, destroy them at the end)")


def add_campaign_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run a whole benchmark campaign on the embedded simulated marketplace")
    p.add_argument("--headless", action="store_true", help="no TUI: progress lines and the receipt on stdout")
    p.add_argument("--seed", type=int, default=7, help="world seed (default 7)")
    p.add_argument("--time-scale", type=positive_number, default=120.0,
                   help="simulated seconds per wall second (default 120: two hours of market in a minute)")
    p.add_argument("--json", action="store_true", help="print the receipt as JSON (implies --headless)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=_cmd_demo)

    campaign = sub.add_parser("campaign", help="plan, run and resume benchmark campaigns")
    csub = campaign.add_subparsers(dest="campaign_command", metavar="ACTION")
    campaign.set_defaults(handler=lambda _a: _help(campaign))
    for name, helptext in (("plan", "shortlist offers for a manifest and print the plan (spends nothing)"),
                           ("run", "plan, ask for approval, then run the campaign to its receipt")):
        pp = csub.add_parser(name, help=helptext, epilog=RUN_EPILOG if name == "run" else None)
        pp.add_argument("manifest", type=Path, help="workload manifest (TOML)")
        _common(pp)
        if name == "run":
            pp.add_argument("--approve-plan", action="store_true",
                            help="approve exactly the printed plan: rent its offers, spend at most its budget, "
                                 "destroy every instance at the end")
            pp.add_argument("--json", action="store_true", help="print the receipt as JSON (implies --headless)")
            pp.add_argument("--headless", action="store_true",
                            help="no console: the plan, then prompts (or --approve-plan) and progress lines")
        pp.set_defaults(handler=_cmd_campaign_plan if name == "plan" else _cmd_campaign_run)
    pr = csub.add_parser("resume", help="after a crash: reconcile with the marketplace, destroy what the campaign "
                                        "left, keep every measurement")
    pr.add_argument("campaign_id", help="the campaign id printed at start")
    _common(pr)
    pr.add_argument("--approve-plan", action="store_true",
                    help="approve destroying the instances this campaign created (what its plan promised)")
    pr.set_defaults(handler=_cmd_campaign_resume)
    from vastui.cli.approve import add_approve_commands

    add_approve_commands(csub)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _common(p: argparse.ArgumentParser) -> None:
    add_connection_args(p)
    p.add_argument("--db", help="the store: a SQLite file, or a team's postgresql:// URL (default: $VASTUI_DB, "
                                   "config db_path/db_url, or the platform data dir)")
    p.add_argument("--ssh-key", help="private key for the hosts (default: ~/.ssh/id_ed25519 or the ssh-agent)")
    p.add_argument("--time-scale", type=positive_number, default=1.0,
                   help="only against a simulator started with the same --time-scale: its clock's speed")


def _event_line(event: Event) -> str | None:
    match event:
        case InstanceRented():
            return f"{event.candidate}: rented offer {event.offer_id} as instance {event.instance_id} " \
                   f"(${event.dph_total:.3f}/h)"
        case CandidatePhaseChanged():
            return f"{event.candidate}: {event.phase}" + (f" — {event.detail}" if event.detail else "")
        case BlockMeasured() if event.block_index % 5 == 0:
            util = f", GPU {event.gpu_util_pct:.0f} %" if event.gpu_util_pct is not None else ""
            return (f"{event.candidate}: block {event.block_index}: {event.throughput_units_per_s:.0f} units/s, "
                    f"data-wait {100 * event.data_wait_share:.0f} %{util}")
        case CandidateEliminated():
            return f"{event.candidate}: eliminated ({event.reason})"
        case InstanceConfirmedGone():
            return f"instance {event.instance_id}: gone (missed by {event.listings_missed} complete listings)"
        case DecisionMade():
            return f"decision: {event.chosen or 'none'} (runner-up {event.runner_up or 'none'}) — {event.summary}"
        case CampaignFinished():
            return f"campaign {event.campaign_id} finished: {event.status}, spent ${event.spend_usd:.2f}"
        case Notice():
            return f"{event.level}: {event.text}"
        case ApprovalAnswered() if not event.granted:
            return f"refused: {event.action} on {event.target} ({event.answered_by}: {event.reason})"
        case ApprovalExpired():
            return f"expired unanswered, counts as refused: {event.action} on {event.target}"
        case ApprovalCancelled():
            return f"approval withdrawn: {event.action} on {event.target} ({event.reason})"
        case CampaignPhaseChanged() if event.phase == CampaignPhase.TEARDOWN:
            return "teardown: destroying every instance of the campaign and proving it gone"
        case AbortRequested():
            return f"aborting: {event.reason} — stopping work, destroying every instance, proving them gone"
    return None


def _printer(console: Console, quiet: bool) -> Callable[[Event], None]:
    def show(event: Event) -> None:
        line = None if quiet else _event_line(event)
        if line:
            console.print(line, highlight=False, markup=False)
    return show


def _summary(receipt: Receipt) -> str:
    d = receipt.decision
    margin = f"{100 * d.margin:.1f} %" if d.margin is not None else "n/a"
    be = f"{d.break_even_units:,.0f} units" if d.break_even_units is not None else "none (wins at every N)"
    gone = ", ".join(str(x.instance_id) for x in receipt.destroyed) or "none"
    return (f"chosen: {d.chosen or 'none'}{' (provisional)' if d.provisional else ''}; runner-up: "
            f"{d.runner_up or 'none'}; margin {margin}; break-even {be}; SLO met: {d.slo_met}\n"
            f"destroyed and proven gone: {gone}; teardown {'PASSED' if receipt.teardown_passed else 'FAILED'}; "
            f"campaign cost ${receipt.campaign_cost_usd:.2f}")


def resume_command(campaign_id: str, args: argparse.Namespace) -> tuple[str, ...]:
    """The exact command that cleans up after this run: its --url, --db and --time-scale (never its API key, nor
    a server's password: the operator's config or $VASTUI_DB gives it again)."""
    command = ["vastui", "campaign", "resume", campaign_id]
    if getattr(args, "url", None):
        command += ["--url", args.url]
    if getattr(args, "db", None):
        command += ["--db", without_password(str(args.db))]
    if getattr(args, "time_scale", 1.0) != 1.0:
        command += ["--time-scale", f"{args.time_scale:g}"]
    return tuple(command)


def resume_hint(receipt: Receipt, args: argparse.Namespace) -> str | None:
    """What to run after a failed teardown (see ``resume_command``), or None when the teardown passed."""
    if receipt.resume_command is None:
        return None
    leaked = ", ".join(str(i) for i in receipt.leaked_instance_ids) or "unknown"
    return (f"teardown FAILED: instances may still exist and bill (still listed or unknown: {leaked}). "
            f"Run: {shlex.join(resume_command(receipt.campaign_id, args))}")


def _on_terminal() -> bool:
    """The console needs a terminal on both ends; off one (CI, a pipe, a pty test) the run stays headless."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _cmd_demo(args: argparse.Namespace) -> int:
    require_simulator()
    from vastui.sim.demo import run_demo  # the simulator only for the demo

    console = Console(stderr=args.json, soft_wrap=True)
    settings = load_settings()
    if not (args.headless or args.json or not _on_terminal()):
        from vastui.cli.campaign_console import demo_in_console

        return demo_in_console(args, data_dir=settings.data_dir, printer=_printer(console, args.quiet),
                               summary=_summary, expiry_s=settings.approval_expiry_s)
    result = run_async(run_demo(
        seed=args.seed, time_scale=args.time_scale, data_dir=settings.data_dir,
        on_plan=lambda text: console.print(text, highlight=False, markup=False),
        on_event=_printer(console, args.quiet), on_start=lambda handle: watch_for_exit(handle, ())))
    if args.json:
        sys.stdout.write(render_json(result.receipt))
    else:
        console.print(render_markdown(result.receipt), highlight=False, markup=False)
        console.print(_summary(result.receipt), highlight=False, markup=False)
        console.print(f"the simulator lists {result.instances_left} instance(s) after the campaign; "
                      f"store: {result.db_shown}", highlight=False, markup=False)
    return 0 if result.receipt.teardown_passed and result.instances_left == 0 else 1


async def _services(args: argparse.Namespace, settings: Settings, store: Store,
                    client: HttpVastClient, clock: Clock) -> CampaignServices:
    keys = [settings.ssh_key_path] if settings.ssh_key_path else []
    runner = SshRunner(known_hosts=settings.known_hosts_path, client_keys=keys, use_agent=not keys, clock=clock)
    return CampaignServices(market=client, executor=runner, store=store, clock=clock, bus=EventBus(),
                    redact=Redactor([settings.api_key.key]))


def _setup(args: argparse.Namespace) -> tuple[Settings, Clock]:
    settings = load_settings(url=args.url, api_key=args.api_key, db_path=args.db, ssh_key=args.ssh_key)
    if settings.api_key.key is None:
        raise ConfigError("no API key: pass --api-key, set VAST_API_KEY, or run `vastai set api-key`")
    ensure_folder(settings.known_hosts_path.parent, what="data folder")  # the store makes the database's own
    # money is measured on the marketplace's clock, learnt from its answers (at --time-scale, the simulator's speed)
    clock: Clock = MarketClock(scale=args.time_scale)
    return settings, clock


async def _with_services(args: argparse.Namespace,
                         body: Callable[[CampaignServices, HttpVastClient, Store], Awaitable[int]], *,
                         key_check: KeyCheck | None = None) -> int:
    settings, clock = _setup(args)
    store = await open_store(settings.db, data_dir=settings.data_dir, operator=settings.operator)
    assert settings.api_key.key is not None
    store.register_secret(settings.api_key.key)
    try:
        async with HttpVastClient(base_url=settings.url, api_key=settings.api_key.key, clock=clock,
                                  audit=store, key_source=settings.api_key.source) as client:
            if key_check is not None:
                await _check_key(args, key_check, client, settings, store, clock)
            services = await _services(args, settings, store, client, clock)
            return await body(services, client, store)
    finally:
        await store.close()


class KeyCheck(enum.StrEnum):
    """What a command does when the SSH key it would log in with is not registered on the account."""

    WARN = "warn"          # plan: say so on stderr, plan anyway (planning rents nothing)
    REQUIRE = "require"    # run: offer to register it at a terminal, else refuse before anything is rented


async def _check_key(args: argparse.Namespace, check: KeyCheck, client: HttpVastClient, settings: Settings,
                     store: Store, clock: Clock) -> None:
    """The SSH key check before a campaign (vastui/cli/sshkey.py). A run offers to register the key only when
    someone is at the terminal to answer: not without one, nor for ``--approve-plan --headless`` (a script's run)."""
    from vastui.cli.sshkey import require_registered_key

    interactive = sys.stdin.isatty() and not (args.approve_plan and (args.headless or args.json))
    approver = (AuditedApprover(PromptApprover(ask_on_terminal, clock=clock), audit=store, clock=clock)
                if check is KeyCheck.REQUIRE and interactive else None)
    try:
        await require_registered_key(client, key_path=settings.ssh_key_path, approver=approver, url=args.url)
    except ConfigError as exc:
        if check is KeyCheck.REQUIRE:
            raise
        print(f"vastui: warning: {exc}", file=sys.stderr)   # planning rents nothing: `campaign run` asks or refuses


def _cmd_campaign_plan(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.manifest, check_query=parse_query)

    async def body(services: CampaignServices, client: HttpVastClient, store: Store) -> int:
        plan = await plan_campaign(services, manifest=manifest, campaign_id=new_campaign_id())
        print(render_plan(plan))
        return 0
    return int(run_async(_with_services(args, body, key_check=KeyCheck.WARN)))


def _approver(args: argparse.Namespace, terms: PlanTerms, clock: Clock) -> PlanApprover | PromptApprover | RefusingApprover:
    if args.approve_plan:
        return PlanApprover(terms, clock=clock)
    if sys.stdin.isatty():
        return PromptApprover(ask_on_terminal, clock=clock)
    return RefusingApprover(NO_TTY)


def _cmd_campaign_run(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.manifest, check_query=parse_query)
    if not args.approve_plan and not sys.stdin.isatty():
        raise ConfigError(NO_TTY)
    console = Console(stderr=args.json, soft_wrap=True)
    expiry_s = load_settings(url=args.url, api_key=args.api_key, db_path=args.db,
                             ssh_key=args.ssh_key).approval_expiry_s

    async def body(services: CampaignServices, client: HttpVastClient, store: Store) -> int:
        campaign_id = new_campaign_id()
        plan = await plan_campaign(services, manifest=manifest, campaign_id=campaign_id)
        if not (args.headless or args.json) and _on_terminal():
            from vastui.cli.campaign_console import run_in_console

            # The console shows the plan and queues every rent for a key (`A` approves the plan as a whole).
            handle = start_campaign(services, manifest=manifest, plan=plan, plan_approved=args.approve_plan,
                                    plan_approved_by="approve-plan flag",
                                    policy=OutsidePlanRefuser() if args.approve_plan else None,
                                    expiry_s=expiry_s)
            watch_for_exit(handle, resume_command(campaign_id, args))
            result = await run_in_console(services, handle, market=client, store=store, time_scale=args.time_scale,
                                          on_detach=_printer(console, False))
            console.print(render_markdown(result.receipt, redact=services.redact), highlight=False, markup=False)
            console.print(_summary(result.receipt), highlight=False, markup=False)
            _print_resume_hint(result.receipt, args)
            return run_exit_status(teardown_passed=result.receipt.teardown_passed,
                                   chosen=result.receipt.decision.chosen, slo_met=result.receipt.decision.slo_met)
        console.print(render_plan(plan), highlight=False, markup=False)
        # On a terminal: the plan as a whole first (one question, asked only now that it is on screen), then,
        # if not, each request on its own prompt, one at a time.
        plan_approved = args.approve_plan or await ask_on_terminal(
            f"Approve exactly this plan: rent these {len(plan.candidates)} offers (reserves only if one vanishes), "
            f"spend at most ${plan.budget_usd:.2f}, destroy every instance it rents?")
        stop = services.bus.listen(held_while_asking(_printer(console, False)))
        try:
            handle = start_campaign(services, manifest=manifest, plan=plan, plan_approved=plan_approved,
                                    plan_approved_by="approve-plan flag" if args.approve_plan else "operator prompt",
                                    policy=OutsidePlanRefuser() if args.approve_plan else None,
                                    operator=None if args.approve_plan else PromptApprover(ask_on_terminal,
                                                                                           clock=services.clock),
                                    expiry_s=expiry_s)
            watch_for_exit(handle, resume_command(campaign_id, args))
            receipt = (await handle.result(abort_if_cancelled="interrupted at the terminal")).receipt
        finally:
            stop()
        if args.json:
            sys.stdout.write(render_json(receipt, redact=services.redact))
        else:
            console.print(render_markdown(receipt, redact=services.redact), highlight=False, markup=False)
            console.print(_summary(receipt), highlight=False, markup=False)
        _print_resume_hint(receipt, args)
        return run_exit_status(teardown_passed=receipt.teardown_passed, chosen=receipt.decision.chosen,
                               slo_met=receipt.decision.slo_met)
    return int(run_async(_with_services(args, body, key_check=KeyCheck.REQUIRE)))


def _print_resume_hint(receipt: Receipt, args: argparse.Namespace) -> None:
    hint = resume_hint(receipt, args)
    if hint is not None:
        print(hint, file=sys.stderr)


RUN_EPILOG = ("exit status: 0 a profile was chosen, its SLO certified, and every instance proven gone, 1 error or "
              "teardown failed, 5 teardown passed but no profile was chosen (chosen: none), 6 teardown passed and a "
              "profile was chosen but no profile certified the SLO (SLO met: no)")
NOTHING_CHOSEN = 5
SLO_NOT_MET = 6


def run_exit_status(*, teardown_passed: bool, chosen: str | None, slo_met: bool) -> int:
    """A campaign that chose nothing, or chose a profile no measurement certified, did not do its job: a script
    must not read it as success."""
    if not teardown_passed:
        return 1
    if chosen is None:
        return NOTHING_CHOSEN
    return 0 if slo_met else SLO_NOT_MET


def _cmd_campaign_resume(args: argparse.Namespace) -> int:
    if not args.approve_plan and not sys.stdin.isatty():
        raise ConfigError("no terminal to ask for approvals: pass --approve-plan to approve destroying the "
                          "instances this campaign created")

    async def body(services: CampaignServices, client: HttpVastClient, store: Store) -> int:
        terms = PlanTerms(campaign_id=args.campaign_id, offer_ids=frozenset(), max_spend_usd=0.0)
        approver = _approver(args, terms, services.clock)
        report = await resume_campaign(services, campaign_id=args.campaign_id, approver=approver,
                                       on_owned=getattr(approver, "mark_owned", None))
        print(json.dumps({"campaign_id": report.campaign_id, "found_instance_ids": list(report.found_instance_ids),
                          "gone": [g.instance_id for g in report.teardown.gone],
                          "still_alive": report.teardown.still_alive, "refused": report.teardown.refused,
                          "runs_kept": report.runs_kept, "interrupted_runs": report.interrupted_runs}))
        return 0 if report.teardown.is_clean else 1
    return int(run_async(_with_services(args, body)))
