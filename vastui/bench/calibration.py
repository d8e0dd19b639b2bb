"""The calibrated prior: how this workload's measured throughput relates to the dlperf prior, with an honest spread.

Before a candidate is rented, all the campaign knows of its speed is the plan's prior (compressed dlperf, see
``vastui.campaign.prior``). Once a few hosts are measured, the ratio measured / prior says how far that prior is off
for *this* workload on *this* market. The model (docs/method.md, Waves) is on the log of that ratio:

    log(measured / prior) = mu + beta * (log prior - centre) + b_model + e_host,
    b_model ~ N(0, tau^2),  e_host ~ N(0, sigma^2)

``mu`` is the workload's overall scale; ``beta`` how the ratio moves with the prior itself (a compute-bound
workload gains more from a fast GPU than dlperf's compression says: beta near +1; an input-bound one, held to its
loaders' pace, hardly gains at all: beta near -1; the prior's own guess is 0); ``b_model`` how far one GPU model
(and GPU count) departs from that line, and ``e_host`` the spread between hosts of one model (a few to ~35 % between hosts, docs/simulator.md) with the
run-to-run noise of the measurement. ``mu`` and ``beta`` are fitted by a ridge (prior-weighted) regression on the
models' means, their uncertainty carried into every prediction; ``sigma`` and ``tau`` start from stated priors
worth a few observations each and are pooled with what the campaign (and the store's history of this workload) measured, so two or three
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
# How the ratio moves with log(prior): none, give or take this much (the slope is +1 for a workload that scales as
# dlperf itself, -1 for one that does not scale with the GPU at all).
SLOPE_SIGMA_PRIOR = 0.6
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


@dataclass(frozen=True, slots=True)
class _Group:
    """One model's observations: their weight, mean log ratio and mean centred log prior."""

    n: float
    x: float
    d: float


@dataclass(frozen=True, slots=True)
class Calibration:
    """The fitted model: the line (``mu``, ``beta`` about ``centre``, with their covariance), ``sigma`` and
    ``tau``, and each measured model's summary for shrinking towards the line."""

    mu: float
    beta: float
    cov: tuple[float, float, float]     # var(mu), cov(mu, beta), var(beta)
    centre: float
    sigma: float
    tau: float
    groups: dict[str, _Group]
    observations: int

    @classmethod
    def fit(cls, observations: Sequence[Observation]) -> Calibration:
        usable = [o for o in observations if o.prior_units_per_s > 0.0 and o.measured_units_per_s > 0.0
                  and o.weight > 0.0 and math.isfinite(o.log_ratio) and math.isfinite(o.prior_units_per_s)]
        blank_cov = (SCALE_SIGMA_PRIOR ** 2, 0.0, SLOPE_SIGMA_PRIOR ** 2)
        if not usable:
            return cls(mu=0.0, beta=0.0, cov=blank_cov, centre=0.0, sigma=HOST_SIGMA_PRIOR, tau=MODEL_TAU_PRIOR,
                       groups={}, observations=0)
        centre = sum(o.weight * math.log(o.prior_units_per_s) for o in usable) / sum(o.weight for o in usable)
        by_model: dict[str, list[Observation]] = {}
        for o in usable:
            by_model.setdefault(o.model, []).append(o)
        groups = {}
        for model, obs in by_model.items():
            n = sum(o.weight for o in obs)
            groups[model] = _Group(n, sum(o.weight * o.log_ratio for o in obs) / n,
                                   sum(o.weight * (math.log(o.prior_units_per_s) - centre) for o in obs) / n)
        mu, beta, cov = 0.0, 0.0, blank_cov
        tau2 = MODEL_TAU_PRIOR ** 2
        sigma2 = HOST_SIGMA_PRIOR ** 2
        for _ in range(4):   # the line given the spreads, the spreads given the line: a few rounds settle
            within = sum(o.weight * (o.log_ratio - beta * (math.log(o.prior_units_per_s) - centre)
                                     - (groups[m].x - beta * groups[m].d)) ** 2
                         for m, obs in by_model.items() for o in obs)
            within_df = sum(max(0.0, g.n - 1.0) for g in groups.values())
            sigma2 = (HOST_SIGMA_WEIGHT * HOST_SIGMA_PRIOR ** 2 + within) / (HOST_SIGMA_WEIGHT + within_df)
            mu, beta, cov = _ridge_line(groups, tau2=tau2, sigma2=sigma2)
            excess = sum(max(0.0, (g.x - mu - beta * g.d) ** 2 - sigma2 / g.n) for g in groups.values())
            tau2 = (MODEL_TAU_WEIGHT * MODEL_TAU_PRIOR ** 2 + excess) / (MODEL_TAU_WEIGHT
                                                                      + max(0, len(groups) - 2))
        return cls(mu=mu, beta=beta, cov=cov, centre=centre, sigma=math.sqrt(sigma2), tau=math.sqrt(tau2),
                   groups=groups, observations=len(usable))

    def predict(self, model: str, prior_units_per_s: float, *, prior_is_measured: bool = False) -> Prediction:
        """The predictive distribution of a new host's throughput: on the fitted line, with the model spread for a
        model not measured; drawn towards a measured model's own hosts as far as they outweigh that spread. A
        prior that is this host's own earlier measurement is taken as it is, with drift and run-to-run noise."""
        if prior_is_measured:
            return Prediction(prior_units_per_s, KNOWN_HOST_SIGMA)
        # nothing measured: no line to move along (the scale's prior spread covers it)
        d = math.log(prior_units_per_s) - self.centre if prior_units_per_s > 0 and self.observations else 0.0
        var_mu, cov_mb, var_beta = self.cov
        line = self.mu + self.beta * d
        line_var = var_mu + 2.0 * d * cov_mb + d * d * var_beta
        group = self.groups.get(model)
        if group is None:
            centre, var = line, line_var + self.tau ** 2
        else:
            sigma2, tau2 = self.sigma ** 2, self.tau ** 2
            shrink = tau2 / (tau2 + sigma2 / group.n)
            own = group.x + self.beta * (d - group.d)    # its hosts' mean, moved along the slope to this prior
            centre = (1.0 - shrink) * line + shrink * own
            var = ((1.0 - shrink) ** 2 * line_var + shrink ** 2 * var_beta * (d - group.d) ** 2
                   + shrink * sigma2 / group.n)
        return Prediction(prior_units_per_s * math.exp(centre), math.sqrt(var + self.sigma ** 2))


def _ridge_line(groups: dict[str, _Group], *, tau2: float, sigma2: float) -> tuple[float, float,
                                                                                    tuple[float, float, float]]:
    """The line through the models' means, each weighted by 1 / (tau^2 + sigma^2 / n), with the priors on the
    scale and the slope as ridge terms; returns (mu, beta, (var mu, cov, var beta))."""
    a = 1.0 / SCALE_SIGMA_PRIOR ** 2
    b = 0.0
    c = 1.0 / SLOPE_SIGMA_PRIOR ** 2
    y0 = y1 = 0.0
    for g in groups.values():
        w = 1.0 / (tau2 + sigma2 / g.n)
        a += w
        b += w * g.d
        c += w * g.d * g.d
        y0 += w * g.x
        y1 += w * g.d * g.x
    det = a * c - b * b
    inv = (c / det, -b / det, a / det)
    return inv[0] * y0 + inv[1] * y1, inv[1] * y0 + inv[2] * y1, inv


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


def normal_quantile(q: float) -> float:
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
        return -normal_quantile(1.0 - q)
    r = q - 0.5
    s = r * r
    return (((((a[0] * s + a[1]) * s + a[2]) * s + a[3]) * s + a[4]) * s + a[5]) * r / \
        (((((b[0] * s + b[1]) * s + b[2]) * s + b[3]) * s + b[4]) * s + 1.0)
