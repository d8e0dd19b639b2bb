"""The calibrated prior: how this workload's measured throughput relates to the dlperf prior, with an honest spread.

Before a candidate is rented, all the campaign knows of its speed is the plan's prior (compressed dlperf, see
``vastui.campaign.prior``). Once a few hosts are measured, the ratio measured / prior says how far that prior is off
for *this* workload on *this* market. The model (docs/method.md, Waves) is on the log of that ratio:

    log(measured / prior) = mu + b_model + e_host,    b_model ~ N(0, tau^2),  e_host ~ N(0, sigma^2)

``mu`` is the workload's overall scale, ``b_model`` how far one GPU model (and GPU count) departs from it (a
compute-bound workload gains more from a fast GPU than dlperf's compression says, an input-bound one less), and
``e_host`` the spread between hosts of one model (a few to ~35 % between hosts, docs/simulator.md) with the
run-to-run noise of the measurement. ``sigma`` and ``tau`` start from stated priors worth a few observations
each and are pooled with what the campaign (and the store's history of this workload) measured, so two or three
measurements cannot talk the spread down to nothing. A host of a model already measured is predicted tightly;
one of an unmeasured model carries ``tau`` too.

``win_probability`` is the chance, under that predictive distribution, that a candidate's true throughput clears
what it needs to beat the leader: the throughput at which its cost per unit equals the leader's upper bound, and
the SLO's floor. Pure arithmetic: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Between hosts of one GPU model, log scale: 0.12 is about a 1.3x spread between the slowest and fastest of a
# handful of hosts (docs/simulator.md: identical-looking hosts differ by 5-35 %), measurement noise included.
HOST_SIGMA_PRIOR = 0.12
HOST_SIGMA_WEIGHT = 4.0      # the prior counts as this many degrees of freedom
# Between GPU models, log scale: how far the compressed-dlperf prior can be off for one model on an unknown
# workload (a compute-bound one scales as dlperf itself, an input-bound one hardly at all: half the log distance
# from the pivot either way, ~0.35 for a model twice as fast or slow as the median).
MODEL_TAU_PRIOR = 0.30
MODEL_TAU_WEIGHT = 3.0
# The workload's overall scale before anything is measured (the prior is in dlperf points, not this workload's units).
SCALE_SIGMA_PRIOR = 1.0
# A host measured for this workload before (its prior is that measurement): drift since then and run-to-run noise.
KNOWN_HOST_SIGMA = 0.06


@dataclass(frozen=True, slots=True)
class Observation:
    """One host measured for this workload: what the dlperf prior said of it and what it did.

    ``model`` is the GPU model and count (``"RTX 4090 x1"``); ``weight`` < 1 lets older history count for less.
    """

    model: str
    prior_units_per_s: float
    measured_units_per_s: float
    weight: float = 1.0

    @property
    def log_ratio(self) -> float:
        return math.log(self.measured_units_per_s / self.prior_units_per_s)


@dataclass(frozen=True, slots=True)
class Prediction:
    """A candidate's throughput before it is measured: log-normal, ``median`` and ``sigma`` (of the log)."""

    median_units_per_s: float
    sigma: float

    def probability_above(self, units_per_s: float) -> float:
        """P(true throughput > ``units_per_s``)."""
        if units_per_s <= 0.0:
            return 1.0
        if not math.isfinite(units_per_s) or self.median_units_per_s <= 0.0:
            return 0.0
        z = (math.log(units_per_s) - math.log(self.median_units_per_s)) / self.sigma
        return 0.5 * math.erfc(z / math.sqrt(2.0))

    def quantile(self, q: float) -> float:
        """The throughput this candidate exceeds with probability 1 - ``q``."""
        return self.median_units_per_s * math.exp(self.sigma * _normal_quantile(q))


@dataclass(frozen=True, slots=True)
class Calibration:
    """The fitted model: ``mu`` with its variance, ``sigma`` and ``tau``, and each measured model's shrunken mean."""

    mu: float
    mu_var: float
    sigma: float
    tau: float
    models: dict[str, tuple[float, float]]   # model -> (posterior mean of mu + b_model, its variance)
    observations: int

    @classmethod
    def fit(cls, observations: Sequence[Observation]) -> Calibration:
        usable = [o for o in observations if o.prior_units_per_s > 0.0 and o.measured_units_per_s > 0.0
                  and o.weight > 0.0 and math.isfinite(o.log_ratio)]
        if not usable:
            return cls(mu=0.0, mu_var=SCALE_SIGMA_PRIOR ** 2, sigma=HOST_SIGMA_PRIOR, tau=MODEL_TAU_PRIOR,
                       models={}, observations=0)
        groups: dict[str, list[Observation]] = {}
        for o in usable:
            groups.setdefault(o.model, []).append(o)
        n = {m: sum(o.weight for o in obs) for m, obs in groups.items()}
        mean = {m: sum(o.weight * o.log_ratio for o in obs) / n[m] for m, obs in groups.items()}
        within = sum(o.weight * (o.log_ratio - mean[m]) ** 2 for m, obs in groups.items() for o in obs)
        within_df = sum(max(0.0, n[m] - 1.0) for m in groups)
        sigma2 = (HOST_SIGMA_WEIGHT * HOST_SIGMA_PRIOR ** 2 + within) / (HOST_SIGMA_WEIGHT + within_df)
        tau2 = MODEL_TAU_PRIOR ** 2
        mu, mu_var = 0.0, SCALE_SIGMA_PRIOR ** 2
        for _ in range(3):   # mu given tau, tau given mu: a few rounds settle
            weights = {m: 1.0 / (tau2 + sigma2 / n[m]) for m in groups}
            mu = sum(weights[m] * mean[m] for m in groups) / sum(weights.values())
            mu_var = 1.0 / sum(weights.values())
            excess = sum(max(0.0, (mean[m] - mu) ** 2 - sigma2 / n[m]) for m in groups)
            tau2 = (MODEL_TAU_WEIGHT * MODEL_TAU_PRIOR ** 2 + excess) / (MODEL_TAU_WEIGHT + max(0, len(groups) - 1))
        models = {}
        for m in groups:
            shrink = tau2 / (tau2 + sigma2 / n[m])
            models[m] = (mu + shrink * (mean[m] - mu), shrink * sigma2 / n[m] + (1.0 - shrink) ** 2 * mu_var)
        return cls(mu=mu, mu_var=mu_var, sigma=math.sqrt(sigma2), tau=math.sqrt(tau2), models=models,
                   observations=len(usable))

    def predict(self, model: str, prior_units_per_s: float, *, prior_is_measured: bool = False) -> Prediction:
        """The predictive distribution of a new host's throughput: of a measured model, its shrunken mean and
        the host spread; of another, the overall scale and the model spread too. A prior that is this host's own
        earlier measurement is taken as it is, with drift and run-to-run noise."""
        if prior_is_measured:
            return Prediction(prior_units_per_s, KNOWN_HOST_SIGMA)
        if model in self.models:
            centre, var = self.models[model]
        else:
            centre, var = self.mu, self.mu_var + self.tau ** 2
        return Prediction(prior_units_per_s * math.exp(centre), math.sqrt(var + self.sigma ** 2))


def needed_throughput(cost_at: Callable[[float], float], *, target_cost: float) -> float:
    """The throughput at which ``cost_at`` (cost per unit, falling as throughput rises) comes down to
    ``target_cost``: inf when no throughput does, 0 when any does."""
    if not math.isfinite(target_cost):
        return 0.0
    low, high = 1e-9, 1e9
    if cost_at(high) > target_cost:
        return math.inf
    if cost_at(low) <= target_cost:
        return 0.0
    for _ in range(200):   # bisection on the log scale: 1e-9 .. 1e9 to a relative 1e-12 or so
        middle = math.sqrt(low * high)
        if cost_at(middle) > target_cost:
            low = middle
        else:
            high = middle
        if high / low < 1.0 + 1e-12:
            break
    return high


def _normal_quantile(q: float) -> float:
    """The standard normal's quantile (Acklam's rational approximation, |error| < 1.2e-9)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"a quantile needs 0 < q < 1, not {q}")
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    if q < 0.02425:
        r = math.sqrt(-2.0 * math.log(q))
        return (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / \
            ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1.0)
    if q > 1.0 - 0.02425:
        return -_normal_quantile(1.0 - q)
    r = q - 0.5
    s = r * r
    return (((((a[0] * s + a[1]) * s + a[2]) * s + a[3]) * s + a[4]) * s + a[5]) * r / \
        (((((b[0] * s + b[1]) * s + b[2]) * s + b[3]) * s + b[4]) * s + 1.0)
