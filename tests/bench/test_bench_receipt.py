"""Receipts: every section is there, failures show as infinite cost, teardown is pass/fail, secrets never appear."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest

from vastui.bench.attribution import Readings, attribute
from vastui.bench.cost import CostInputs
from vastui.bench.manifest import load_manifest
from vastui.bench.receipt import (
    ApprovalRecord,
    CandidateReport,
    DestroyedInstance,
    Outcome,
    Receipt,
    StartupSplit,
    WorkloadIdentity,
    receipt_to_dict,
    render_json,
    render_markdown,
)
from vastui.bench.select import Finalist, decide_profile
from vastui.bench.stats import Interval, Verdict, summarize_latency
from vastui.config import Redactor, Secret

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "4f1c9e7a0b2d6e8f1a3c5b7d9e0f2a4c6b8d0e1f3a5c7b9d2e4f6a8c0b1d3e5f"  # looks like a Vast key
INSTANCE_KEY = "sk-inst-Zq81mNp0Xr44LkT"


def make_receipt(*, hypothesis: str = "fast PCIe 4 host, cheap bandwidth", leaked: tuple[int, ...] = (),
                 absent: tuple[float, ...] = (1_800_000_100.0, 1_800_000_130.0)) -> Receipt:
    manifest = load_manifest(ROOT / "examples" / "resnet.toml")
    cost = CostInputs(price_per_hour_usd=0.6, startup_s=150.0, warmup_s=50.0)
    theta = Interval(30.0, 29.0, 31.0, 0.95, 12)
    cost_ci = Interval(9.0e-6, 8.8e-6, 9.3e-6, 0.95, 12)
    finalists = [Finalist("c1", cost, theta, cost_ci, Verdict.MET)]
    good = CandidateReport(
        candidate_id="c1", gpu_name="RTX 4090", num_gpus=1, price_per_hour_usd=0.6, hypothesis=hypothesis,
        outcome=Outcome.CHOSEN, offer_id=101, instance_id=9001, machine_id=77, host_id=5, driver_version="550.54",
        cuda_version="12.4", blocks=12, steps=640, throughput=theta,
        latency=summarize_latency([float(x % 40) for x in range(600)]), gpu_util_pct=97.0, data_wait_share=0.01,
        startup=StartupSplit(pull_s=120.0, readiness_s=30.0, warmup_s=50.0), cost_per_unit=cost_ci,
        attribution=attribute(Readings(gpu_activity_pct=97.0, data_wait_share=0.01)))
    failed = CandidateReport(
        candidate_id="c2", gpu_name="H100 SXM", num_gpus=1, price_per_hour_usd=2.0,
        hypothesis="fastest GPU on the list", outcome=Outcome.FAILED, outcome_detail="canary digest mismatch",
        instance_id=9002, cost_per_unit=Interval(math.inf, math.inf, math.inf, 0.95, 0),
        startup=StartupSplit(pull_s=900.0, readiness_s=60.0))
    return Receipt(
        campaign_id="camp-1", created_at=1_800_000_000.0, workload=WorkloadIdentity.from_manifest(manifest),
        units=manifest.production_units, warmup_policy="max(30 s, 20 steps), then CV of last 10 <= 5 %, cap 180 s",
        candidates=(good, failed), decision=decide_profile(finalists, units=manifest.production_units),
        approvals=(ApprovalRecord("create_instance", "offer:101", "rent RTX 4090 for the race", "operator",
                                  1_799_999_000.0, cost_cap_usd=5.0),),
        destroyed=(DestroyedInstance(9001, 1_800_000_050.0, absent, "absent from two complete listings"),
                   DestroyedInstance(9002, 1_800_000_060.0, absent)),
        leaked_instance_ids=leaked, campaign_cost_usd=1.23, notes=("p99 certified with 600 samples",))


def test_json_has_every_section_and_is_strict_json() -> None:
    receipt = make_receipt()
    text = render_json(receipt)
    data = json.loads(text)
    for key in ("workload", "candidates", "decision", "approvals", "destroyed", "campaign_cost_usd", "units",
                "warmup_policy", "teardown_passed", "version"):
        assert key in data
    assert data["workload"]["digest"] == receipt.workload.digest
    assert data["workload"]["inputs"][0]["path"] == "resnet-canary.jsonl"
    chosen, failed = data["candidates"]
    assert chosen["outcome"] == "chosen" and chosen["hypothesis"] == "fast PCIe 4 host, cheap bandwidth"
    assert chosen["latency"]["n"] == 600 and chosen["startup"]["pull_s"] == 120.0
    assert chosen["attribution"]["bottleneck"] == "compute_bound"
    assert failed["cost_per_unit"]["point"] == "inf"  # failures are reported, as infinite cost
    assert data["decision"]["chosen"] == "c1" and data["decision"]["provisional"] is False
    assert data["teardown_passed"] is True and data["campaign_cost_usd"] == 1.23
    assert "Infinity" not in text and "NaN" not in text


def test_markdown_reads_like_a_receipt() -> None:
    text = render_markdown(make_receipt())
    for heading in ("# vastui receipt — campaign camp-1", "## Decision", "## Workload", "## Candidates",
                    "## Latency (ms)", "## Utilisation, data-wait and attribution", "## Startup",
                    "## Approvals given", "## Teardown: **PASSED**", "## Cost of this campaign"):
        assert heading in text
    assert "Chosen: **c1** — $0.009 [$0.0088, $0.0093]" in text
    assert "∞ (failed)" in text and "canary digest mismatch" in text
    assert "compute_bound: GPU activity 97%" in text
    assert "$1.23" in text and "2027-01-15" in text
    assert "Provisional: no" in text and "SLO met: yes" in text


def test_teardown_fails_on_a_leak_or_a_single_listing() -> None:
    assert not make_receipt(leaked=(9003,)).teardown_passed
    assert "## Teardown: **FAILED**" in render_markdown(make_receipt(leaked=(9003,)))
    assert "9003" in render_markdown(make_receipt(leaked=(9003,)))
    assert not make_receipt(absent=(1_800_000_100.0,)).teardown_passed  # one listing is not proof


def test_secrets_in_free_text_are_redacted_by_the_hook() -> None:
    receipt = make_receipt(hypothesis=f"cheap host; debug: key={API_KEY} token {INSTANCE_KEY} "
                                      "Authorization: Bearer abcdefghijklmnop")
    redact = Redactor([Secret(API_KEY), Secret(INSTANCE_KEY)])
    for text in (render_json(receipt, redact=redact), render_markdown(receipt, redact=redact),
                 json.dumps(receipt_to_dict(receipt, redact=redact))):
        assert API_KEY not in text and INSTANCE_KEY not in text and "abcdefghijklmnop" not in text
        assert "cheap host" in text
    # without the hook the renderer adds nothing and hides nothing: it was never given a secret to hide
    assert API_KEY in render_json(receipt)


def _field_names(cls: type, seen: set[type]) -> list[str]:
    if cls in seen or not dataclasses.is_dataclass(cls):
        return []
    seen.add(cls)
    names = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        names.append(f"{cls.__name__}.{f.name}")
        for arg in _types_in(hints[f.name]):
            names += _field_names(arg, seen)
    return names


def _types_in(hint: object) -> list[type]:
    found = [hint] if isinstance(hint, type) else []
    for arg in typing.get_args(hint):
        found += _types_in(arg)
    return found


def test_no_receipt_field_can_hold_a_key() -> None:
    names = _field_names(Receipt, set())
    assert "Receipt.decision" in names and "CandidateReport.attribution" in names and "Evidence.metric" in names
    words = ("key", "secret", "token", "password", "credential", "auth")
    assert [n for n in names if any(w in n.split(".")[1].lower() for w in words)] == []


def test_markdown_shows_runner_up_break_even_and_provisional() -> None:
    fast = CostInputs(price_per_hour_usd=2.00, startup_s=960.0, warmup_s=40.0, inet_usd_per_gb=0.04,
                      transfer_gb_fixed=18.0)
    slow = CostInputs(price_per_hour_usd=0.60, startup_s=150.0, warmup_s=50.0, inet_usd_per_gb=0.002,
                      transfer_gb_fixed=18.0)
    finalists = [
        Finalist("slow", slow, Interval(30.0, 30.0, 30.0, 0.95, 10), Interval(9.0e-6, 9.0e-6, 9.0e-6, 0.95, 10),
                 Verdict.MET),
        Finalist("fast", fast, Interval(120.0, 120.0, 120.0, 0.95, 0), Interval(6.8e-5, 6.8e-5, 6.8e-5, 0.95, 0),
                 Verdict.MET, is_measured=False),
    ]
    receipt = dataclasses.replace(make_receipt(), decision=decide_profile(finalists, units=20_000))
    text = render_markdown(receipt)
    assert "Runner-up: fast" in text and "Break-even N: 1,302,720 units" in text
    assert "Provisional: **yes**" in text
    assert json.loads(render_json(receipt))["decision"]["break_even_units"] == pytest.approx(1_302_720, rel=1e-12)


def test_a_candidate_rented_and_failed_was_tried_one_never_rented_was_not() -> None:
    # a failure on a rented host is infinite cost, a result (the method); only a candidate never rented leaves the
    # decision provisional (taken among fewer than the plan's candidates)
    base = make_receipt()
    failed = dataclasses.replace(base.candidates[1], is_measured=False, blocks=0)   # rented, its canary failed
    receipt = dataclasses.replace(base, candidates=(base.candidates[0], failed))
    assert receipt.never_measured == () and not receipt.is_provisional
    skipped = dataclasses.replace(failed, instance_id=None, outcome_detail="rent not approved")
    unrented = dataclasses.replace(receipt, candidates=(receipt.candidates[0], skipped))
    assert unrented.never_measured == ("c2",) and unrented.is_provisional
    assert "never measured: c2" in render_markdown(unrented)
