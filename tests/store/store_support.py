"""Shared constants for the store tests (a plain module: conftest modules are not for importing)."""

from __future__ import annotations

DIGEST = "sha256:workload-a"
