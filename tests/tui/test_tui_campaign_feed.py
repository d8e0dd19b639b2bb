"""Following a campaign without a screen: a picture on connect, bursts of events folded into one picture, a
subscriber that fell behind redrawn from the snapshot (and told how many it lost), recent data-wait and elimination
moments derived from the stream, and the last picture delivered before the end."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.tui.campaign_canned import CID, NOW, racing_snapshot
from tests.waiting import until
from vastui.campaign.handle import CampaignResult
from vastui.campaign.snapshot import CampaignSnapshot
from vastui.clock import Clock, WallClock
from vastui.events import CandidateEliminated, EventBus, SampleTaken
from vastui.events_live import ProgressReported
from vastui.store import Store
from vastui.tui.campaign_feed import Derived, follow_campaign
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture


class Answers:
    def __init__(self) -> None:
        self.wall: Clock = WallClock()

    def approve(self, request_id: str, *, by: str = "") -> bool:
        return False

    def refuse(self, request_id: str, *, by: str = "", reason: str = "") -> bool:
        return False

    def approve_plan(self, *, by: str = "") -> int:
        return 0

    def stop_asking(self, reason: str) -> int:
        return 0

    def keep_for_command(self, store: Store, *, campaign_id: str) -> None:
        return None


class FakeCampaign:
    def __init__(self) -> None:
        self.campaign_id = CID
        self.bus = EventBus()
        self.broker = Answers()
        self.snapshots = 0
        self.ended: asyncio.Future[CampaignResult] = asyncio.get_running_loop().create_future()

    @property
    def is_done(self) -> bool:
        return self.ended.done()

    def snapshot(self) -> CampaignSnapshot:
        self.snapshots += 1
        return dataclasses.replace(racing_snapshot(), seq=self.bus.last_seq)

    def abort(self, reason: str) -> None:
        pass

    async def result(self, *, abort_if_cancelled: str | None = None) -> CampaignResult:
        return await asyncio.shield(self.ended)


def sample(i: int) -> SampleTaken:
    return SampleTaken(at=NOW + i, campaign_id=CID, candidate="c1", gpu_index=i % 2, util_pct=90.0, mem_used_mib=1.0)


async def test_a_burst_of_events_becomes_one_fresh_picture_and_a_lagging_queue_is_redrawn() -> None:
    campaign = FakeCampaign()
    pictures: list[CampaignPicture] = []
    follower = asyncio.create_task(follow_campaign(campaign, deliver=pictures.append, min_interval_s=0.2,
                                                   queue_size=50))
    try:
        await until(lambda: len(pictures) == 1, "the picture on connect")
        assert pictures[0].snapshot.seq == 0
        for i in range(500):   # ten times the queue: the subscription drops the oldest and says so
            campaign.bus.publish(sample(i))
        await until(lambda: pictures[-1].snapshot.seq == 500, "a picture of the whole burst")
        assert len(pictures) == 2, "one burst, one picture"
        assert pictures[-1].events_lost == 450
    finally:
        follower.cancel()
    assert campaign.snapshots == 2, "a snapshot on connect and one per picture, not one per event"


async def test_recent_data_wait_and_elimination_moments_come_from_the_stream() -> None:
    derived = Derived(CID)
    for wait, compute in ((0.0, 1.0), *[(0.5, 0.5)] * 5):   # the window keeps the last five markers
        derived.apply(ProgressReported(at=NOW, campaign_id=CID, candidate="c2", instance_id=1, purpose="race",
                                       units=1, accepted=1, data_wait_s=wait, compute_s=compute, steps=1,
                                       units_total=1, accepted_total=1))
    derived.apply(CandidateEliminated(at=NOW + 5, campaign_id=CID, candidate="c2", reason="dominated"))
    derived.apply(CandidateEliminated(at=NOW + 9, campaign_id="another", candidate="c3", reason="dominated"))
    picture = derived.picture(racing_snapshot())
    assert picture.data_wait_share == {"c2": 0.5}
    assert picture.eliminated_at == {"c2": NOW + 5}
    [starved] = [g for g in picture.snapshot.gpus if g.candidate == "c2"]
    assert picture.gpu_attribution(starved) is None, "no verdict before readings agree on one"
    for i in range(3):   # three readings in a row agree: a verdict
        derived.apply(SampleTaken(at=NOW + 10 + i, campaign_id=CID, candidate="c2", gpu_index=0, util_pct=36.0,
                                  mem_used_mib=1.0))
    verdict = derived.picture(racing_snapshot()).gpu_attribution(starved)
    assert verdict is not None and str(verdict.bottleneck) == "input_bound"


async def test_a_gpu_idle_between_trials_gets_no_verdict_however_high_its_data_wait() -> None:
    derived = Derived(CID)
    derived.apply(ProgressReported(at=NOW, campaign_id=CID, candidate="c1", instance_id=1, purpose="tuning",
                                   units=1, accepted=1, data_wait_s=0.135, compute_s=0.865, steps=1,
                                   units_total=1, accepted_total=1))
    for i in range(20):
        derived.apply(SampleTaken(at=NOW + i, campaign_id=CID, candidate="c1", gpu_index=0, util_pct=0.0,
                                  mem_used_mib=1.0))
    snapshot = racing_snapshot()
    idle = dataclasses.replace(snapshot.gpus[0], util_pct=0.0)
    picture = derived.picture(dataclasses.replace(snapshot, gpus=(idle, *snapshot.gpus[1:])))
    assert picture.verdicts["c1/0"].attribution is None and picture.verdicts["c1/0"].is_idle
    assert picture.gpu_attribution(idle) is None


@pytest.mark.slow
async def test_the_last_picture_comes_before_the_end() -> None:
    campaign = FakeCampaign()
    seen: list[str] = []
    ends: list[CampaignEnd] = []

    def drawn(picture: CampaignPicture) -> None:
        seen.append(f"picture {picture.snapshot.seq}")

    def ended(end: CampaignEnd) -> None:
        seen.append("end")
        ends.append(end)

    follower = asyncio.create_task(follow_campaign(campaign, deliver=drawn, on_end=ended, min_interval_s=5.0))
    try:
        await until(lambda: seen == ["picture 0"], "the picture on connect")
        campaign.bus.publish(sample(1))
        await until(lambda: seen[-1:] == ["picture 1"], "the picture of the event")
        campaign.ended.set_exception(RuntimeError("the host vanished"))   # while no event is waiting
        await until(lambda: "end" in seen, "the end")
    finally:
        follower.cancel()
    assert seen == ["picture 0", "picture 1", "picture 1", "end"], "the end comes after a last, fresh picture"
    assert ends[0].error == "the host vanished" and ends[0].receipt is None


async def test_a_campaign_whose_task_was_cancelled_still_ends_and_a_cancelled_follower_still_stops() -> None:
    """A console told to quit when the campaign ends waits for this end: a campaign task that ended cancelled must
    deliver one (before, the follower ended on the CancelledError and the console waited for ever). Cancelling the
    follower itself still stops it, with no end."""
    campaign = FakeCampaign()
    ends: list[CampaignEnd] = []
    follower = asyncio.create_task(follow_campaign(campaign, deliver=lambda _p: None, on_end=ends.append))
    try:
        await asyncio.sleep(0)
        campaign.ended.cancel()
        await until(lambda: ends, "the end of a cancelled campaign")
    finally:
        follower.cancel()
    assert ends[0].receipt is None and ends[0].error is not None and "cancelled" in ends[0].error

    running = FakeCampaign()
    ends = []
    follower = asyncio.create_task(follow_campaign(running, deliver=lambda _p: None, on_end=ends.append))
    await asyncio.sleep(0.05)
    follower.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follower
    assert ends == [] and not running.is_done
