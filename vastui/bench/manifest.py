"""The workload manifest: a TOML file parsed into frozen dataclasses, with errors that say file, line and field.

The manifest's identity digest is the key under which every measurement of this workload is kept: it covers the
workload's name, image (pinned by digest), command and the bytes of every input file, so it changes when any byte of
the workload changes. It deliberately leaves out budgets, SLOs and statistics settings: those change how a workload is
judged, not how fast a host runs it, so host knowledge stays comparable across them.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vastui.bench.inputs import InputFile, hash_input, identity_digest
from vastui.bench.toml_fields import Locator, TableReader
from vastui.errors import ManifestError, QueryError

# --- defaults (docs/method.md), each with the reason it has ------------------------------------------------------
# Warm-up: JIT/cuDNN autotuning, allocator growth and page cache warm over tens of steps; 30 s and 20 steps cover the
# usual compile/autotune phase before the steadiness test is even tried.
WARMUP_MIN_S = 30.0
WARMUP_MIN_STEPS = 20
# Steady when the coefficient of variation of the last 10 step times is <= 5 %: below that, block-to-block noise on
# cloud hosts dominates, so waiting longer buys nothing.
WARMUP_CV_MAX = 0.05
WARMUP_WINDOW = 10
# A workload that never settles is measured anyway after 3 minutes (and flagged); warm-up is paid for.
WARMUP_CAP_S = 180.0
# Blocks of >= 30 s and >= 20 steps: block means absorb the autocorrelation of consecutive steps.
BLOCK_S = 30.0
BLOCK_MIN_STEPS = 20
# Racing: first elimination test after 5 blocks per candidate; the winner needs >= 10 blocks of evidence.
MIN_BLOCKS = 5
WINNER_MIN_BLOCKS = 10
# ~15 minutes of measurement per candidate at 30 s blocks; past this, candidates that still overlap are within noise.
MAX_BLOCKS = 30
# Independent runs (separate processes, each with its own warm-up) per finalist: blocks of one run share that run's
# luck (clocks, placement, neighbours), so one run cannot show run-to-run variation.
MIN_RUNS = 2
# Between-run coefficient of variation assumed before a candidate's own runs say otherwise (pooled with them, as a
# prior worth RUN_CV_PRIOR_WEIGHT runs): repeated runs on one cloud host typically differ by a few per cent.
RUN_CV_PRIOR = 0.04
# Readiness deadline = max(10 min, 3 x predicted pull time): slow registries are normal, stuck hosts are not.
READINESS_MIN_S = 600.0
READINESS_PULL_FACTOR = 3.0
# Bound the burn rate while racing interleaves blocks; a candidate instance may not outlive an hour by default.
MAX_INSTANCES = 4
MAX_INSTANCE_LIFETIME_S = 3600.0
# Shortlist: 6-8 offers by prior cost, >= 2 hosts per GPU model (identical-looking hosts differ by 5-34 %).
MAX_CANDIDATES = 8
MIN_HOSTS_PER_MODEL = 2
MIN_RELIABILITY = 0.98
# Ceilings on money: a benchmark campaign is hours of a few GPUs, so a budget past $100k or a price past $1000/h is
# a typo (1e308 would also make every sum of costs overflow to infinity).
MAX_BUDGET_USD = 100_000.0
MAX_DPH_USD = 1_000.0
# Tuning: accept a change only above 2 % gain, from >= 5 interleaved A/B pairs.
TUNING_MIN_GAIN = 0.02
TUNING_MIN_PAIRS = 5
# Racing the shortlist in waves (docs/method.md, Waves): a waiting candidate is passed over, unrented, when the
# calibrated prior gives it less than this probability of beating the measured leader; the receipt lists each such
# offer with its probability, so the risk taken is visible.
MISS_PROBABILITY = 0.05
# A host this workload was measured on within this many days is re-verified (canary and a few blocks, its earlier
# runs counted), not raced from scratch.
REVERIFY_MAX_AGE_DAYS = 14.0

PRECISIONS = frozenset({"fp32", "tf32", "fp16", "bf16", "fp8", "int8"})
LATENCY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
_PINNED_IMAGE = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")
_DIGEST = re.compile(r"^(?:sha256:)?([0-9a-fA-F]{64})$")
_SECTIONS = ("workload", "warmup", "measure", "correctness", "slo", "production", "budget", "shortlist", "tuning",
             "race")


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    image: str
    command: tuple[str, ...]
    inputs: tuple[InputFile, ...]
    image_size_gb: float


@dataclass(frozen=True, slots=True)
class WarmupRule:
    min_s: float = WARMUP_MIN_S
    min_steps: int = WARMUP_MIN_STEPS
    cv_max: float = WARMUP_CV_MAX
    window: int = WARMUP_WINDOW
    cap_s: float = WARMUP_CAP_S


@dataclass(frozen=True, slots=True)
class MeasureRule:
    block_s: float = BLOCK_S
    block_min_steps: int = BLOCK_MIN_STEPS
    min_blocks: int = MIN_BLOCKS
    winner_min_blocks: int = WINNER_MIN_BLOCKS
    max_blocks: int = MAX_BLOCKS
    min_runs: int = MIN_RUNS
    run_cv_prior: float = RUN_CV_PRIOR


@dataclass(frozen=True, slots=True)
class Correctness:
    """The gate: the output digest must equal ``expected_digest`` and/or the checker command must pass.

    ``tolerance`` is handed to the checker (a digest either matches or not). ``fold_canary``: the canary is the first
    phase of each candidate's first measuring run (one agent start, one warm-up) instead of a run of its own; only
    for a workload that honours ``VASTUI_CANARY_STEPS`` (docs/method.md, Canary folded into the first run).
    """

    expected_digest: str | None
    checker: tuple[str, ...] | None
    tolerance: float | None
    fold_canary: bool = False


@dataclass(frozen=True, slots=True)
class LatencyCeiling:
    percentile: float
    max_ms: float

    @property
    def label(self) -> str:
        return f"p{self.percentile:g}"


@dataclass(frozen=True, slots=True)
class Slo:
    throughput_min_units_per_s: float | None = None
    latency: LatencyCeiling | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    max_usd: float
    max_instances: int = MAX_INSTANCES
    max_instance_lifetime_s: float = MAX_INSTANCE_LIFETIME_S
    readiness_min_s: float = READINESS_MIN_S
    readiness_pull_factor: float = READINESS_PULL_FACTOR

    def readiness_deadline_s(self, *, predicted_pull_s: float) -> float:
        """Seconds an instance may take to become ready: max(readiness_min_s, factor x predicted pull time)."""
        return max(self.readiness_min_s, self.readiness_pull_factor * predicted_pull_s)


@dataclass(frozen=True, slots=True)
class Shortlist:
    """``query`` is kept as written, in the official CLI's search language (docs/api-notes.md §4)."""

    query: str = ""
    max_candidates: int = MAX_CANDIDATES
    min_hosts_per_model: int = MIN_HOSTS_PER_MODEL
    max_dph: float | None = None
    min_reliability: float = MIN_RELIABILITY


@dataclass(frozen=True, slots=True)
class Tuning:
    """The variables a campaign may change; an empty tuple means the variable stays as the workload sets it."""

    batch_sizes: tuple[int, ...] = ()
    precisions: tuple[str, ...] = ()
    loaders: tuple[int, ...] = ()
    gpu_counts: tuple[int, ...] = ()
    min_gain: float = TUNING_MIN_GAIN
    min_pairs: int = TUNING_MIN_PAIRS


@dataclass(frozen=True, slots=True)
class RaceRule:
    """How the shortlist is rented: ``first_wave`` candidates at once (0: sized by the engine, at least two GPU
    models), then in waves chosen by the calibrated prior; an offer whose probability of beating the leader is below
    ``miss_probability`` is passed over."""

    miss_probability: float = MISS_PROBABILITY
    first_wave: int = 0
    reverify_max_age_days: float = REVERIFY_MAX_AGE_DAYS


@dataclass(frozen=True, slots=True)
class Manifest:
    path: Path
    digest: str
    workload: Workload
    warmup: WarmupRule
    measure: MeasureRule
    correctness: Correctness
    slo: Slo
    production_units: int
    budget: Budget
    shortlist: Shortlist
    tuning: Tuning
    race: RaceRule = RaceRule()

    def summary(self) -> str:
        """A few human lines: what runs, how it is judged, what it may spend."""
        w = self.workload
        slo = []
        if self.slo.throughput_min_units_per_s is not None:
            slo.append(f"throughput >= {self.slo.throughput_min_units_per_s:g} units/s")
        if self.slo.latency is not None:
            slo.append(f"{self.slo.latency.label} <= {self.slo.latency.max_ms:g} ms")
        lines = [
            f"workload   {w.name}  ({len(w.inputs)} input file(s), {sum(i.size_bytes for i in w.inputs)} bytes)",
            f"image      {w.image}",
            f"command    {' '.join(w.command)}",
            f"production {self.production_units} units",
            f"slo        {', '.join(slo) if slo else 'none'}",
            f"budget     ${self.budget.max_usd:g}, <= {self.budget.max_instances} instances at once",
        ]
        return "\n".join(lines)


def load_manifest(path: Path, *, check_query: Callable[[str], object] | None = None) -> Manifest:
    """Read and validate a manifest; raises ManifestError naming the file, line and dotted field.

    ``check_query`` parses ``shortlist.query`` (``vastui.vast.query.parse_query``: bench knows no query language);
    a QueryError it raises becomes a ManifestError at that line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read the file: {exc}", path=str(path), line=None, field="<file>") from exc
    locator = Locator(text, path=str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = locator.line_from_decode_error(str(exc))
        field = locator.field_at(line) if line is not None else "<toml>"
        raise ManifestError(f"not valid TOML: {exc}", path=str(path), line=line, field=field) from exc
    except RecursionError as exc:  # tomllib recurses once per nested array or inline table
        raise ManifestError("nested too deeply to read (arrays or tables inside each other)", path=str(path),
                            line=None, field="<toml>") from exc
    return _build(data, locator=locator, path=path, check_query=check_query)


def _build(data: dict[str, object], *, locator: Locator, path: Path,
           check_query: Callable[[str], object] | None) -> Manifest:
    for key in data:
        if key not in _SECTIONS:
            locator.unknown(key, known=_SECTIONS)
    workload = _workload(TableReader.section(data, "workload", locator, required=True), base=path.parent)
    warmup = _warmup(TableReader.section(data, "warmup", locator))
    measure = _measure(TableReader.section(data, "measure", locator))
    production = TableReader.section(data, "production", locator, required=True)
    units = production.integer("units", minimum=1)
    production.finish()
    return Manifest(
        path=path,
        digest=identity_digest(name=workload.name, image=workload.image, command=workload.command,
                               inputs=workload.inputs),
        workload=workload,
        warmup=warmup,
        measure=measure,
        correctness=_correctness(TableReader.section(data, "correctness", locator, required=True)),
        slo=_slo(TableReader.section(data, "slo", locator)),
        production_units=units,
        budget=_budget(TableReader.section(data, "budget", locator, required=True)),
        shortlist=_shortlist(TableReader.section(data, "shortlist", locator), check_query=check_query),
        tuning=_tuning(TableReader.section(data, "tuning", locator)),
        race=_race(TableReader.section(data, "race", locator)),
    )


def _workload(t: TableReader, *, base: Path) -> Workload:
    name = t.text("name", non_empty=True)
    image = t.text("image", non_empty=True)
    if not _PINNED_IMAGE.match(image):
        t.fail("image", "must be pinned by digest, e.g. 'repo/name@sha256:<64 hex digits>' (a tag can move)")
    command = t.texts("command", non_empty=True)
    paths = t.optional_texts("inputs") or ()
    inputs = []
    for index, rel in enumerate(paths):
        if rel in paths[:index]:
            t.fail("inputs", f"lists {rel!r} twice")
        inputs.append(hash_input(rel, base=base, fail=lambda reason: t.fail("inputs", reason)))
    image_size_gb = t.number("image_size_gb", minimum=0.0)
    t.finish()
    return Workload(name=name, image=image, command=command, inputs=tuple(inputs), image_size_gb=image_size_gb)


def _warmup(t: TableReader) -> WarmupRule:
    rule = WarmupRule(
        min_s=t.number("min_s", default=WARMUP_MIN_S, minimum=0.0),
        min_steps=t.integer("min_steps", default=WARMUP_MIN_STEPS, minimum=1),
        cv_max=t.number("cv_max", default=WARMUP_CV_MAX, minimum=0.0, maximum=1.0),
        window=t.integer("window", default=WARMUP_WINDOW, minimum=2),
        cap_s=t.number("cap_s", default=WARMUP_CAP_S, minimum=0.0),
    )
    if rule.cap_s < rule.min_s:
        t.fail("cap_s", f"must be at least min_s ({rule.min_s:g})")
    t.finish()
    return rule


def _measure(t: TableReader) -> MeasureRule:
    rule = MeasureRule(
        block_s=t.number("block_s", default=BLOCK_S, minimum=1.0),
        block_min_steps=t.integer("block_min_steps", default=BLOCK_MIN_STEPS, minimum=1),
        min_blocks=t.integer("min_blocks", default=MIN_BLOCKS, minimum=2),
        winner_min_blocks=t.integer("winner_min_blocks", default=WINNER_MIN_BLOCKS, minimum=2),
        max_blocks=t.integer("max_blocks", default=MAX_BLOCKS, minimum=2),
        min_runs=t.integer("min_runs", default=MIN_RUNS, minimum=1),
        run_cv_prior=t.number("run_cv_prior", default=RUN_CV_PRIOR, minimum=0.0, maximum=1.0),
    )
    if rule.winner_min_blocks < rule.min_blocks:
        t.fail("winner_min_blocks", f"must be at least min_blocks ({rule.min_blocks})")
    if rule.max_blocks < rule.winner_min_blocks:
        t.fail("max_blocks", f"must be at least winner_min_blocks ({rule.winner_min_blocks})")
    t.finish()
    return rule


def _correctness(t: TableReader) -> Correctness:
    digest = t.optional_text("expected_digest")
    if digest is not None:
        match = _DIGEST.match(digest)
        if match is None:
            t.fail("expected_digest", "must be 'sha256:' followed by 64 hex digits")
        digest = "sha256:" + match.group(1).lower()
    checker = t.optional_texts("checker", non_empty=True)
    tolerance = t.optional_number("tolerance", minimum=0.0)
    if digest is None and checker is None:
        t.fail(None, "needs expected_digest or a checker command: an unchecked output cannot be 'accepted'")
    if tolerance is not None and checker is None:
        t.fail("tolerance", "needs a checker command: a digest either matches or not")
    # Off unless asked: a workload that ignores VASTUI_CANARY_STEPS never says its output is complete, and every
    # folded canary would fail on it (docs/method.md, Canary folded into the first run).
    fold = t.boolean("fold_canary", default=False)
    t.finish()
    return Correctness(expected_digest=digest, checker=checker, tolerance=tolerance, fold_canary=fold)


def _slo(t: TableReader) -> Slo:
    floor = t.optional_number("throughput_min_units_per_s", minimum=0.0, exclusive=True)
    label = t.optional_text("latency_percentile")
    ceiling = t.optional_number("latency_max_ms", minimum=0.0, exclusive=True)
    latency = None
    if label is not None or ceiling is not None:
        if label is None or ceiling is None:
            t.fail("latency_max_ms" if ceiling is None else "latency_percentile",
                   "latency_percentile and latency_max_ms go together")
        if label not in LATENCY_PERCENTILES:
            t.fail("latency_percentile", f"must be one of {', '.join(LATENCY_PERCENTILES)}")
        latency = LatencyCeiling(percentile=LATENCY_PERCENTILES[label], max_ms=ceiling)
    if t.present and floor is None and latency is None:
        t.fail(None, "needs throughput_min_units_per_s and/or latency_percentile with latency_max_ms")
    t.finish()
    return Slo(throughput_min_units_per_s=floor, latency=latency)


def _budget(t: TableReader) -> Budget:
    budget = Budget(
        max_usd=t.number("max_usd", minimum=0.0, maximum=MAX_BUDGET_USD, exclusive=True),
        max_instances=t.integer("max_instances", default=MAX_INSTANCES, minimum=1),
        max_instance_lifetime_s=t.number("max_instance_lifetime_s", default=MAX_INSTANCE_LIFETIME_S,
                                         minimum=0.0, exclusive=True),
        readiness_min_s=t.number("readiness_min_s", default=READINESS_MIN_S, minimum=0.0, exclusive=True),
        readiness_pull_factor=t.number("readiness_pull_factor", default=READINESS_PULL_FACTOR, minimum=1.0),
    )
    t.finish()
    return budget


def _shortlist(t: TableReader, *, check_query: Callable[[str], object] | None) -> Shortlist:
    query = t.text("query", default="")
    if check_query is not None:
        try:
            check_query(query)
        except QueryError as exc:
            t.fail("query", f"{exc.reason} (column {exc.column} of the query)")
    shortlist = Shortlist(
        query=query,
        max_candidates=t.integer("max_candidates", default=MAX_CANDIDATES, minimum=1),
        min_hosts_per_model=t.integer("min_hosts_per_model", default=MIN_HOSTS_PER_MODEL, minimum=1),
        max_dph=t.optional_number("max_dph", minimum=0.0, maximum=MAX_DPH_USD, exclusive=True),
        min_reliability=t.number("min_reliability", default=MIN_RELIABILITY, minimum=0.0, maximum=1.0),
    )
    t.finish()
    return shortlist


def _tuning(t: TableReader) -> Tuning:
    precisions = t.optional_texts("precisions") or ()
    for value in precisions:
        if value not in PRECISIONS:
            t.fail("precisions", f"unknown precision {value!r}; use {', '.join(sorted(PRECISIONS))}")
    tuning = Tuning(
        batch_sizes=t.integers("batch_sizes", minimum=1),
        precisions=precisions,
        loaders=t.integers("loaders", minimum=0),
        gpu_counts=t.integers("gpu_counts", minimum=1),
        min_gain=t.number("min_gain", default=TUNING_MIN_GAIN, minimum=0.0, maximum=1.0),
        min_pairs=t.integer("min_pairs", default=TUNING_MIN_PAIRS, minimum=2),
    )
    t.finish()
    return tuning


def _race(t: TableReader) -> RaceRule:
    rule = RaceRule(
        miss_probability=t.number("miss_probability", default=MISS_PROBABILITY, minimum=0.0, maximum=0.5),
        first_wave=t.integer("first_wave", default=0, minimum=0),
        reverify_max_age_days=t.number("reverify_max_age_days", default=REVERIFY_MAX_AGE_DAYS, minimum=0.0),
    )
    t.finish()
    return rule
