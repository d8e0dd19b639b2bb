"""The label every instance vastui rents is created under: ``vastui-<campaign>-<candidate>-<offer>``.

The one home of that format: built before the create call, matched by prefix to find a campaign's instances (a
create whose answer was lost is found by its label alone), and parsed to tell whose a listed instance is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The campaign id is whatever precedes the last two parts (a candidate id has no dash, an offer id is a number).
_PATTERN = re.compile(r"^vastui-(?P<campaign>.+)-(?P<candidate>[^-]+)-(?P<offer>\d+)$")


@dataclass(frozen=True, slots=True)
class CampaignLabel:
    """A vastui label's parts."""

    campaign_id: str
    candidate_id: str
    offer_id: int


def build_label(*, campaign_id: str, candidate_id: str, offer_id: int) -> str:
    """The label an instance rented for ``candidate_id`` of ``campaign_id`` on ``offer_id`` is created under."""
    return f"{campaign_prefix(campaign_id)}{candidate_id}-{offer_id}"


def campaign_prefix(campaign_id: str) -> str:
    """What every label of ``campaign_id`` starts with."""
    return f"vastui-{campaign_id}-"


def is_campaigns(label: str | None, campaign_id: str) -> bool:
    """Whether ``label`` names an instance of ``campaign_id``."""
    return (label or "").startswith(campaign_prefix(campaign_id))


def parse_label(label: str | None) -> CampaignLabel | None:
    """The parts of a vastui label, or None when ``label`` is not one."""
    match = _PATTERN.match(label or "")
    if match is None:
        return None
    return CampaignLabel(match.group("campaign"), match.group("candidate"), int(match.group("offer")))
