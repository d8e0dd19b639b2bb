"""The campaign label: built, matched by prefix and parsed in one place (campaign/labels.py)."""

from __future__ import annotations

import pytest

from vastui.campaign.labels import CampaignLabel, build_label, campaign_prefix, is_campaigns, parse_label


@pytest.mark.parametrize("campaign_id", ["c1a2b3c4", "ad-hoc-7f", "x"])
def test_a_built_label_parses_back_to_its_parts(campaign_id: str) -> None:
    label = build_label(campaign_id=campaign_id, candidate_id="c3", offer_id=4711)
    assert label.startswith(campaign_prefix(campaign_id))
    assert parse_label(label) == CampaignLabel(campaign_id, "c3", 4711)
    assert is_campaigns(label, campaign_id)


def test_labels_of_other_campaigns_and_foreign_labels_are_told_apart() -> None:
    label = build_label(campaign_id="c1", candidate_id="c2", offer_id=9)
    assert not is_campaigns(label, "c")            # a prefix of the id is another campaign
    assert not is_campaigns(None, "c1")
    assert parse_label("my-own-box") is None
    assert parse_label("vastui-c1-c2-notanumber") is None
    assert parse_label(None) is None
