"""The receipt of a campaign: what was measured, what was chosen and why, what it cost, and proof of teardown.

A receipt is built from frozen dataclasses and rendered as JSON (for machines and the store) or Markdown (for people).
No field is meant to hold a secret, and both renderers pass every string through an optional ``redact`` hook
(the console passes its Redactor) as a second line of defence: secrets never appear in a receipt.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vastui.bench.attribution import Attribution
from vastui.bench.manifest import Manifest
from vastui.bench.select import Decision
from vastui.bench.stats import Interval, LatencySummary

Redact = Callable[[str], str]
RECEIPT_VERSION = 1


class Outcome(enum.StrEnum):
    CHOSEN = "chosen"
    RUNNER_UP = "runner_up"
    FINALIST = "finalist"
    ELIMINATED = "eliminated"
    FAILED = "failed"
    PASSED_OVER = "passed_over"   # never rented: its chance of beating the leader was below the miss probability


@dataclass(frozen=True, slots=True)
class InputDigest:
    path: str
    sha256: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    name: str
    digest: str
    image: str
    command: tuple[str, ...]
    inputs: tuple[InputDigest, ...]

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> WorkloadIdentity:
        w = manifest.workload
        return cls(w.name, manifest.digest, w.image, w.command,
                   tuple(InputDigest(f.path, f.sha256, f.size_bytes) for f in w.inputs))


@dataclass(frozen=True, slots=True)
class StartupSplit:
    """Seconds of image pull, of readiness after it, of the workload's own init, and of warm-up (paid, not
    measured); and the console's own overhead (SSH, agent upload and start), shown apart and never charged to a
    production run. None when unknown."""

    pull_s: float | None = None
    readiness_s: float | None = None
    warmup_s: float | None = None
    workload_init_s: float | None = None
    console_overhead_s: float | None = None


@dataclass(frozen=True, slots=True)
class CandidateReport:
    candidate_id: str
    gpu_name: str
    num_gpus: int
    price_per_hour_usd: float
    hypothesis: str
    outcome: Outcome
    outcome_detail: str = ""
    offer_id: int | None = None
    instance_id: int | None = None
    machine_id: int | None = None
    host_id: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    blocks: int = 0
    steps: int = 0
    is_measured: bool = True
    throughput: Interval | None = None
    latency: LatencySummary | None = None
    gpu_util_pct: float | None = None
    data_wait_share: float | None = None
    startup: StartupSplit = StartupSplit()
    cost_per_unit: Interval | None = None
    attribution: Attribution | None = None
    runs: int = 0                      # independent measured runs (separate agent processes)
    billed_usd: float | None = None    # what the marketplace billed for this candidate's rental
    profile: str = ""                  # the profile its blocks were measured at (the race's, after screening)
    earlier_blocks: int = 0            # blocks at an earlier profile that left the race when it was screened


@dataclass(frozen=True, slots=True)
class PassedOver:
    """An offer never rented because its chance of beating the measured leader, when its wave was chosen, was
    below the miss probability (its slot may have gone to a reserve, reported under the same candidate id)."""

    candidate_id: str
    offer_id: int
    gpu_name: str
    num_gpus: int
    probability: float
    why: str


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """An approval the operator gave (copied from the audit log, without anything secret)."""

    action: str
    target: str
    summary: str
    granted_by: str
    granted_at: float
    cost_cap_usd: float | None = None


@dataclass(frozen=True, slots=True)
class DestroyedInstance:
    """A destroyed benchmark instance; gone for certain only after two successive complete listings missed it."""

    instance_id: int
    destroyed_at: float | None
    absent_in_listings_at: tuple[float, ...]
    evidence: str = ""

    @property
    def is_proven_gone(self) -> bool:
        return len(self.absent_in_listings_at) >= 2


@dataclass(frozen=True, slots=True)
class Receipt:
    campaign_id: str
    created_at: float
    workload: WorkloadIdentity
    units: int
    warmup_policy: str
    candidates: tuple[CandidateReport, ...]
    decision: Decision
    approvals: tuple[ApprovalRecord, ...]
    destroyed: tuple[DestroyedInstance, ...]
    leaked_instance_ids: tuple[int, ...]
    campaign_cost_usd: float
    notes: tuple[str, ...] = ()
    miss_probability: float | None = None   # the manifest's: below it, a waiting candidate was passed over
    passed_over: tuple[PassedOver, ...] = ()

    @property
    def never_measured(self) -> tuple[str, ...]:
        """The candidates never tried: no measured block and never rented (refused, expired, skipped), passed over
        ones apart (their risk is stated: ``passed_over``). One that was rented and failed (its host, its container,
        its canary) was tried: the method counts it as an infinite cost, a result like any other, so it does not
        make the decision provisional."""
        return tuple(c.candidate_id for c in self.candidates
                     if not c.is_measured and c.outcome is not Outcome.PASSED_OVER
                     and not (c.outcome is Outcome.FAILED and c.instance_id is not None))

    @property
    def is_provisional(self) -> bool:
        """A decision is provisional when it rests on a prior, or when some candidate was never measured: the
        choice was made among fewer than the plan's candidates."""
        return self.decision.provisional or bool(self.never_measured)

    @property
    def teardown_passed(self) -> bool:
        """Teardown is a pass/fail test: nothing left running and every destroyed instance proven gone."""
        return not self.leaked_instance_ids and all(d.is_proven_gone for d in self.destroyed)

    @property
    def resume_command(self) -> str | None:
        """What to run when the teardown failed: ``campaign resume`` destroys what may still exist and proves it
        gone (with the same ``--db`` and ``--url`` as the run). None when the teardown passed."""
        return None if self.teardown_passed else f"vastui campaign resume {self.campaign_id}"


def receipt_to_dict(receipt: Receipt, *, redact: Redact | None = None) -> dict[str, object]:
    """Plain JSON-safe data: enums as values, tuples as lists, infinities as the strings "inf"/"-inf"."""
    data = _plain(receipt, redact or _identity)
    assert isinstance(data, dict)
    data["version"] = RECEIPT_VERSION
    data["teardown_passed"] = receipt.teardown_passed
    data["never_measured"] = list(receipt.never_measured)
    data["provisional"] = receipt.is_provisional
    data["resume_command"] = receipt.resume_command
    return data


def render_json(receipt: Receipt, *, redact: Redact | None = None) -> str:
    return json.dumps(receipt_to_dict(receipt, redact=redact), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def _identity(text: str) -> str:
    return text


def _plain(value: object, redact: Redact) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), redact) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return _plain(value.value, redact)
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Path):
        return redact(str(value))
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, tuple | list):
        return [_plain(item, redact) for item in value]
    return value


# --- Markdown --------------------------------------------------------------------------------------------------

def render_markdown(receipt: Receipt, *, redact: Redact | None = None) -> str:
    """A human receipt; the whole text passes through ``redact``."""
    parts = [
        _md_header(receipt), _md_decision(receipt), _md_workload(receipt), _md_candidates(receipt),
        _md_latency(receipt), _md_utilisation(receipt), _md_startup(receipt), _md_approvals(receipt),
        _md_teardown(receipt),
    ]
    if receipt.notes:
        parts.append("## Notes\n\n" + "\n".join(f"- {_cell(n)}" for n in receipt.notes))
    text = "\n\n".join(parts) + "\n"
    return redact(text) if redact else text


def _when(at: float | None) -> str:
    return "—" if at is None else datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _num(value: float | None, spec: str = ".4g") -> str:
    if value is None:
        return "—"
    return "∞" if math.isinf(value) else format(value, spec)


def _per_1k(value: float) -> str:
    return "∞ (failed)" if math.isinf(value) else f"${value * 1000:.4g}"


def cost_text(interval: Interval | None) -> str:
    """Cost per 1,000 accepted units with its interval, as the receipt prints it."""
    if interval is None:
        return "—"
    if math.isinf(interval.point):
        return "∞ (failed)"
    return f"{_per_1k(interval.point)} [{_per_1k(interval.low)}, {_per_1k(interval.high)}]"


def _interval(interval: Interval | None) -> str:
    if interval is None:
        return "—"
    return f"{_num(interval.point)} [{_num(interval.low)}, {_num(interval.high)}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) if rows else "_none_"


def _md_header(r: Receipt) -> str:
    return (f"# vastui receipt — campaign {r.campaign_id}\n\n"
            f"Written {_when(r.created_at)}. Workload **{_cell(r.workload.name)}** `{r.workload.digest}`, "
            f"production batch N = {r.units:,} units. Costs are USD per 1,000 accepted units at N, "
            f"point [interval], with startup, warm-up, storage and bandwidth included.")


def _md_decision(r: Receipt) -> str:
    d = r.decision
    lines = ["## Decision", ""]
    if d.chosen is None:
        lines.append(f"- **No profile chosen**: {d.reason}")
    else:
        lines.append(f"- Chosen: **{d.chosen}** — {cost_text(d.chosen_cost)}")
    if d.runner_up is not None:
        margin = "—" if d.margin is None else f"{d.margin:+.1%}"
        aside = "" if d.runner_up_comparable else "; not choosable in its place (SLO not certified, or out of the race)"
        lines.append(f"- Runner-up: {d.runner_up} — {cost_text(d.runner_up_cost)}; margin {margin} "
                     f"(upper bounds{aside})")
        lines.append("- Break-even N: " + ("none — the chosen profile is cheaper at every N"
                                            if d.break_even_units is None
                                            else f"{d.break_even_units:,.0f} units (the two swap places there)"))
    lines.append(f"- SLO met: {'yes' if d.slo_met else 'no'}")
    reasons = []
    if d.provisional:
        reasons.append("a finalist's throughput is a provider dlperf prior, not a measurement")
    if r.never_measured:
        measured = len(r.candidates) - len(r.never_measured)
        reasons.append(f"never measured: {', '.join(r.never_measured)} (decided on {measured} of "
                       f"{len(r.candidates)} candidates)")
    if r.passed_over:
        stated = "" if r.miss_probability is None else f", below the miss probability of {r.miss_probability:.0%}"
        lines.append(f"- Passed over unrented (chance of beating the measured leader when its wave was chosen"
                     f"{stated}): " + "; ".join(
                         f"{p.candidate_id} offer {p.offer_id} {_cell(p.gpu_name)} x{p.num_gpus} "
                         f"{100 * p.probability:.1f} %" for p in r.passed_over)
                     + f"; the chance that one of them was the cheapest is at most "
                       f"{100 * min(1.0, sum(p.probability for p in r.passed_over)):.1f} %")
    lines.append("- Provisional: " + ("**yes** — " + "; ".join(reasons) if reasons
                                       else "no — every candidate was measured"
                                       + (" or passed over with its chance stated" if r.passed_over else "")))
    if d.chosen is not None:
        lines.append(f"- Why: {d.reason}")
    return "\n".join(lines)


def _md_workload(r: Receipt) -> str:
    w = r.workload
    rows = [(f"`{i.path}`", f"`{i.sha256}`", f"{i.size_bytes:,}") for i in w.inputs]
    return (f"## Workload\n\n- Image: `{w.image}`\n- Command: `{' '.join(w.command)}`\n"
            f"- Warm-up policy: {r.warmup_policy}\n" + (f"\n{_table(('input', 'sha256', 'bytes'), rows)}" if rows
                                                         else "- Inputs: none"))


def _md_candidates(r: Receipt) -> str:
    rows = []
    for c in r.candidates:
        host = "—" if c.machine_id is None else f"machine {c.machine_id}"
        outcome = (c.outcome_detail if c.outcome is Outcome.PASSED_OVER and c.outcome_detail
                   else c.outcome.value + (f": {c.outcome_detail}" if c.outcome_detail else ""))
        source = "" if c.is_measured else " (dlperf prior)"
        rows.append((c.candidate_id, f"{c.num_gpus}× {c.gpu_name}", host, f"${c.price_per_hour_usd:.3f}",
                     outcome, f"{c.blocks} / {c.steps}", _interval(c.throughput) + source,
                     cost_text(c.cost_per_unit)))
    header = ("candidate", "GPU", "host", "$/h", "outcome", "blocks / steps", "throughput units/s",
              "cost per 1k accepted")
    # the hypotheses are sentences: listed below the table, so that its numbers keep their columns' width
    hypotheses = "".join(f"\n- {c.candidate_id}: {_cell(c.hypothesis)}" for c in r.candidates if c.hypothesis)
    raced = "".join(f"\n- {c.candidate_id}: {c.profile}"
                    + (f" ({c.earlier_blocks} blocks at an earlier profile left the race)" if c.earlier_blocks else "")
                    for c in r.candidates if c.profile)
    return ("## Candidates\n\n" + _table(header, rows) + (f"\n\nHypotheses:\n{hypotheses}" if hypotheses else "")
            + (f"\n\nRaced at:\n{raced}" if raced else ""))


def _md_latency(r: Receipt) -> str:
    rows = [(c.candidate_id, str(c.latency.n), _num(c.latency.p50_ms), _num(c.latency.p95_ms),
             _num(c.latency.p99_ms)) for c in r.candidates if c.latency is not None]
    return "## Latency (ms)\n\n" + _table(("candidate", "n", "p50", "p95", "p99"), rows)


def _md_utilisation(r: Receipt) -> str:
    rows = []
    for c in r.candidates:
        wait = None if c.data_wait_share is None else 100 * c.data_wait_share
        bottleneck = c.attribution.summary if c.attribution else "—"
        move = c.attribution.next_move if c.attribution else "—"
        rows.append((c.candidate_id, _num(c.gpu_util_pct, ".0f"), _num(wait, ".1f"), bottleneck, move))
    return "## Utilisation, data-wait and attribution\n\n" + _table(
        ("candidate", "GPU util %", "data-wait %", "bottleneck (evidence)", "next move"), rows)


def _md_startup(r: Receipt) -> str:
    rows = [(c.candidate_id, _num(c.startup.pull_s, ".0f"), _num(c.startup.readiness_s, ".0f"),
             _num(c.startup.workload_init_s, ".0f"), _num(c.startup.warmup_s, ".0f"),
             _num(c.startup.console_overhead_s, ".0f"), str(c.runs), _num(c.billed_usd, ".3f"))
            for c in r.candidates]
    return ("## Startup (seconds, apart from execution) and runs\n\n"
            "Console overhead (SSH, the agent's upload and start) is this console's, not the workload's: it is "
            "shown, and not charged to a production run.\n\n" + _table(
                ("candidate", "image pull", "readiness", "workload init", "warm-up", "console overhead",
                 "measured runs", "billed $"), rows))


def _md_approvals(r: Receipt) -> str:
    rows = [(_when(a.granted_at), a.action, a.target, _num(a.cost_cap_usd, ".2f"), a.granted_by, a.summary)
            for a in r.approvals]
    return "## Approvals given\n\n" + _table(("when", "action", "target", "cost cap $", "by", "summary"), rows)


def _md_teardown(r: Receipt) -> str:
    verdict = "**PASSED**" if r.teardown_passed else "**FAILED**"
    rows = [(str(d.instance_id), _when(d.destroyed_at), ", ".join(_when(t) for t in d.absent_in_listings_at) or "—",
             "yes" if d.is_proven_gone else "NO", d.evidence) for d in r.destroyed]
    lines = [f"## Teardown: {verdict}", "",
             _table(("instance", "destroyed", "absent in listings at", "proven gone", "evidence"), rows)]
    if r.leaked_instance_ids:
        lines += ["", "Still existing (leaks): " + ", ".join(str(i) for i in r.leaked_instance_ids)]
    if r.resume_command is not None:
        lines += ["", f"Instances may still exist and bill. Run `{r.resume_command}` (with this run's --db and "
                      "--url) to destroy them and prove them gone."]
    lines += ["", f"## Cost of this campaign\n\n${r.campaign_cost_usd:.2f}"]
    return "\n".join(lines)
