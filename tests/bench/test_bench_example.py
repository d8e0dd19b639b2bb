"""The example manifest is consistent with the simulator's reference workload: a healthy host passes its gate."""

from __future__ import annotations

import hashlib
from pathlib import Path

from vastui.bench.manifest import load_manifest
from vastui.sim.simworkload import predictions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet.toml"


def test_example_expected_digest_is_the_simulated_output_of_its_input() -> None:
    manifest = load_manifest(EXAMPLE)
    (canary,) = manifest.workload.inputs
    assert canary.path in manifest.workload.command  # the workload reads the pinned input
    data = canary.resolved.read_bytes()
    healthy = "sha256:" + hashlib.sha256("".join(predictions(data, wrong=False)).encode()).hexdigest()
    wrong = "sha256:" + hashlib.sha256("".join(predictions(data, wrong=True)).encode()).hexdigest()
    assert manifest.correctness.expected_digest == healthy
    assert wrong != healthy
