"""Money, the one way: a candidate's cost inputs and a rental's bill, both from ``vastui.bench.billing``.

The cost formula prices a production run with the same rules the marketplace bills by (GPUs while running, disk
while the instance exists, traffic per GB); a benchmark rental's bill is those rules over the moments the
marketplace showed — its ``start_date``, the container's start in its log (or the first ``running`` listing),
and the answered destroy — and the bytes its log says the pull moved.
"""

from __future__ import annotations

from vastui.bench import billing
from vastui.bench.cost import CostInputs
from vastui.bench.manifest import Manifest
from vastui.campaign.candidate import CandidateRun
from vastui.campaign.plan import Candidate
from vastui.campaign.prior import DISK_GIB, prior_inputs
from vastui.campaign.startup import rates_of


def prior_cost_inputs(candidate: Candidate, manifest: Manifest) -> CostInputs:
    """Before anything is measured: the plan's own prior inputs (prior.prior_inputs), so the race starts from the
    figures the shortlist was ranked by."""
    return prior_inputs(candidate.offer, pull_s=candidate.predicted_pull_s, manifest=manifest)


def measured_cost_inputs(run: CandidateRun, manifest: Manifest) -> CostInputs:
    """A production run on this candidate's host, from what its benchmark rental showed.

    Loading and the workload's init as measured (the console's own overhead is not production's); the pull's
    bytes as the log reported them (none when the image was cached), else the manifest's image size.
    """
    prior = prior_cost_inputs(run.candidate, manifest)
    loading = run.loading_s
    pulled_gb = run.loading.pulled_gb if run.loading is not None else None
    return CostInputs(
        price_per_hour_usd=prior.price_per_hour_usd,
        loading_s=loading if loading is not None else (float("inf") if run.passed_gate is False else
                                                       prior.loading_s),
        startup_s=run.workload_init_s or 0.0,
        # what warm-up costs production: its time beyond the work it did (the runs' mean), else all of it
        warmup_s=(sum(run.warmup_lost_s) / len(run.warmup_lost_s)) if run.warmup_lost_s else (run.warmup_s or 0.0),
        storage_usd_per_hour=prior.storage_usd_per_hour, inet_usd_per_gb=prior.inet_usd_per_gb,
        transfer_gb_fixed=pulled_gb if pulled_gb is not None else prior.transfer_gb_fixed,
        passed_gate=run.passed_gate is not False)


def bill_of(run: CandidateRun, *, manifest: Manifest, created_local: float | None, now: float) -> billing.Bill:
    """What the marketplace billed (or has billed so far) for this candidate's rental.

    Created at its ``start_date`` (the local rent time until one is known), running from the container's start,
    ended at the answered destroy (``now`` while it lives); traffic as the log reported the pull (the manifest's
    image size when no log said). The few bytes of inputs staged over SSH are not counted.
    """
    created = run.rented_at if run.rented_at is not None else created_local
    if created is None:
        return billing.NO_CHARGE
    ended = run.ended_at if run.ended_at is not None else now
    rates = rates_of(run.candidate.offer, disk_gib=DISK_GIB)
    pulled_gb = run.loading.pulled_gb if run.loading is not None else None
    down_gb = pulled_gb if pulled_gb is not None else manifest.workload.image_size_gb
    usage = billing.usage_from_transitions(created_at=created, running_at=run.running_at, ended_at=ended,
                                           down_gb=down_gb)
    return billing.bill(rates, usage)
