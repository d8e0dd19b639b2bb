"""Shared pieces of the campaign tests: a fast variant of the example manifest (same workload, shorter blocks)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet.toml"


def fast_manifest(directory: Path, *, budget_usd: float | None = None, max_candidates: int = 4,
                  tune_precision: bool = False) -> Path:
    """The example workload with short warm-up and blocks, so a whole campaign takes seconds of wall time.

    Tuning is off (one value per knob) unless ``tune_precision``: then only fp32 -> bf16 is tried.
    """
    text = EXAMPLE.read_text(encoding="utf-8")
    replacements = {
        r"(?m)^min_s = 30$": "min_s = 10",
        r"(?m)^min_steps = 20$": "min_steps = 5",
        r"(?m)^window = 10$": "window = 5",
        r"(?m)^cap_s = 180$": "cap_s = 60",
        r"(?m)^block_s = 30$": "block_s = 10",
        r"(?m)^block_min_steps = 20$": "block_min_steps = 3",
        r"(?m)^min_blocks = 5$": "min_blocks = 3",
        r"(?m)^winner_min_blocks = 10$": "winner_min_blocks = 5",
        r"(?m)^max_blocks = 30$": "max_blocks = 8",
        r"(?m)^max_candidates = 8$": f"max_candidates = {max_candidates}",
        r"(?m)^latency_max_ms = 2000$": "latency_max_ms = 5000",
        r'(?m)^latency_percentile = "p99"$': 'latency_percentile = "p90"',
    }
    replacements[r"(?m)^batch_sizes = \[64, 128, 256\]$"] = "batch_sizes = [64]"
    replacements[r"(?m)^loaders = \[4, 8\]$"] = "loaders = [4]"
    if not tune_precision:
        replacements[r'(?m)^precisions = \["fp32", "bf16"\]$'] = 'precisions = ["fp32"]'
    if budget_usd is not None:
        replacements[r"(?m)^max_usd = 5.00$"] = f"max_usd = {budget_usd}"
    for pattern, new in replacements.items():
        text, count = re.subn(pattern, new, text)
        assert count == 1, pattern
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE.with_name("resnet-canary.jsonl"), directory / "resnet-canary.jsonl")
    path = directory / "fast.toml"
    path.write_text(text, encoding="utf-8")
    return path
