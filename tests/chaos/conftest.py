"""The chaos campaigns reuse the campaign tests' fast manifest (``tests/campaign/campaign_support.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

CAMPAIGN_TESTS = str(Path(__file__).resolve().parents[1] / "campaign")
if CAMPAIGN_TESTS not in sys.path:
    sys.path.append(CAMPAIGN_TESTS)
