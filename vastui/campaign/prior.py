"""The prior: what a campaign expects of an offer before it has measured it (docs/method.md, Shortlist).

Throughput from compressed dlperf (or what a host measured before, or a scale learned from earlier runs), a pull
time from the advertised download speed, and the prior's cost inputs under the one billing model — the figures the
shortlist is ranked by and the race starts from.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from vastui.bench.cost import CostInputs
from vastui.bench.manifest import Manifest
from vastui.bench.tuning import Profile
from vastui.campaign.repeat import throughputs_at
from vastui.campaign.startup import RENTED_DISK_GIB, rates_of
from vastui.store.records import HostKnowledge
from vastui.vast.models import Offer

# Until a campaign has measured, throughput is assumed to grow as dlperf to this power about the median offer's
# (docs/method.md, Shortlist): 1 trusts dlperf's spread in full, 0 ignores it. A workload bound by its input path,
# memory or start-up gains far less from a faster GPU than dlperf says. With SLO_SHORTFALL_PRIOR below, the 8-offer
# shortlist held an offer within 3 % of the true optimum in 459 of 460 seeded markets (the benchmark's four
# workloads), against 443 with dlperf at its word and 440 for the plan's earlier prior.
DLPERF_EXPONENT_PRIOR = 0.5
# A machine whose dlperf, taken at its word (1 unit/s per point, or the learned scale), is under this share of the
# SLO's throughput floor is ranked after every machine that is not (a measured one: under the floor itself). The
# compression above lifts slow GPUs' priors towards the floor; this keeps them from filling a small shortlist
# that then has no machine meeting the SLO. Plateau 0.6-0.8 on the seeded markets; demoting below 0.9 or 1.0
# pushed good input-bound machines out.
SLO_SHORTFALL_PRIOR = 0.7
# A machine the shortfall rule would demote is judged instead at this lift when the manifest lets tuning try a half
# precision the GPU runs natively (fp16 from compute capability 7.0, bf16 from 8.0, fp8 from 8.9) and the first
# profile is not already one: tensor cores typically run a compute-bound model 1.5-2x faster at half precision, and
# the screening races later machines at the profile it finds (docs/method.md, Shortlist). Without it, the cheapest
# machine that meets the SLO at bf16 was ranked after every other and never measured.
HALF_PRECISION_LIFT_PRIOR = 1.5
_HALF_PRECISION_MIN_CC = {"fp16": 700, "bf16": 800, "fp8": 890}
# Extraction + container boot after the pull, before SSH answers (docs/simulator.md, Hidden truth: 30-90 s).
READINESS_PRIOR_S = 60.0
# Effective pull speed as a share of the advertised inet_down (docs/simulator.md, Hidden truth: 0.3-0.6).
PULL_EFFICIENCY_PRIOR = 0.45
DISK_GIB = RENTED_DISK_GIB
# Multi-GPU without NVLink rarely scales linearly (docs/simulator.md: 2x ~1.6-1.8x on consumer cards): the prior
# assumes this share of linear speed-up per doubling until a run measures it.
MULTI_GPU_EFFICIENCY_PRIOR = 0.85

def precision_lift_prior(offer: Offer, manifest: Manifest) -> float:
    """How much faster the best half precision the manifest allows might run ``offer`` than its first profile:
    ``HALF_PRECISION_LIFT_PRIOR`` when the GPU runs one natively and the first profile is full precision, else 1."""
    precisions = manifest.tuning.precisions
    if not precisions or precisions[0] in _HALF_PRECISION_MIN_CC or offer.compute_cap is None:
        return 1.0
    runs_half = any(offer.compute_cap >= _HALF_PRECISION_MIN_CC[p] for p in precisions if p in _HALF_PRECISION_MIN_CC)
    return HALF_PRECISION_LIFT_PRIOR if runs_half else 1.0


def predicted_pull_s(offer: Offer, *, image_size_gb: float) -> float:
    """Image size over the effective download speed, plus readiness (docs/method.md, Shortlist: the startup prior)."""
    mbps = max(offer.inet_down or 100.0, 10.0) * PULL_EFFICIENCY_PRIOR
    return image_size_gb * 8000.0 / mbps + READINESS_PRIOR_S


def dlperf_pivot(offers: Sequence[Offer]) -> float:
    """The per-GPU dlperf the prior's compression turns about: the median over the offers being ranked."""
    per_gpu = [o.dlperf / max(o.num_gpus, 1) for o in offers if o.dlperf and o.dlperf > 0]
    return statistics.median(per_gpu) if per_gpu else 1.0


def compressed_dlperf(per_gpu: float, *, pivot: float) -> float:
    """A GPU's dlperf with its distance from the pivot shrunk to DLPERF_EXPONENT_PRIOR of its log-ratio: what the
    throughput prior is proportional to before anything is measured (docs/method.md, Shortlist)."""
    if per_gpu <= 0.0 or pivot <= 0.0:
        return 0.0
    return pivot * math.pow(per_gpu / pivot, DLPERF_EXPONENT_PRIOR)


def workload_scale(knowledge: Sequence[HostKnowledge], offers_by_machine: dict[int, Offer], *,
                   pivot: float, profile_of: Callable[[Offer, int], Profile] | None = None) -> float | None:
    """Measured throughput per (compressed) dlperf point across hosts we ran on before (None when nothing is
    known). With ``profile_of`` (the profile a host's offer and GPU count are raced at), a host counts by its best
    run at that profile only, and not at all without one: a scale learned at fp32 would misprice a race at bf16."""
    ratios = []
    for host in knowledge:
        offer = offers_by_machine.get(host.machine_id)
        if host.best is None or offer is None or not offer.dlperf or host.best.throughput_units_per_s is None:
            continue
        best = host.best.throughput_units_per_s
        if profile_of is not None:
            here = throughputs_at(host, profile_of(offer, host.num_gpus))
            if not here:
                continue
            best = max(here)
        ratios.append(best / compressed_dlperf(offer.dlperf / max(offer.num_gpus, 1), pivot=pivot))
    return statistics.median(ratios) if ratios else None


def moved_gb(manifest: Manifest) -> float:
    """What a rental downloads when its host lacks the image: the image and the staged inputs."""
    return manifest.workload.image_size_gb + sum(i.size_bytes for i in manifest.workload.inputs) / 1e9


def prior_inputs(offer: Offer, *, pull_s: float, manifest: Manifest) -> CostInputs:
    """Before anything is measured, under the one billing model (vastui/bench/billing.py): the predicted pull as
    loading (the disk bills, the GPUs do not), no init, the warm-up floor, a full download of the image and inputs.
    The shortlist is ranked by it and the race starts from it (charges.prior_cost_inputs)."""
    rates = rates_of(offer, disk_gib=DISK_GIB)
    return CostInputs(price_per_hour_usd=rates.gpu_usd_per_hour, startup_s=0.0, loading_s=pull_s,
                      warmup_s=manifest.warmup.min_s, storage_usd_per_hour=rates.storage_usd_per_hour,
                      inet_usd_per_gb=rates.inet_down_usd_per_gb, transfer_gb_fixed=moved_gb(manifest))
