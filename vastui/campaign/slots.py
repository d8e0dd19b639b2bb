"""Each candidate's slot in a running campaign, and the budget the slots hold.

A ``Slot`` is the one object per candidate: what the candidate has become (its ``CandidateRun``: instance, blocks,
phase) and what the engine decided for it (eliminated, bound for tuning, its tuning, the money it holds, its task).
The ``Ledger`` adds up the slots' money: what each rental may still cost (its worst case while alive, its bill
once destroyed) against the budget, and what the billing model says has been billed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from vastui.bench.manifest import Manifest
from vastui.campaign.candidate import CandidateRun
from vastui.campaign.charges import bill_of
from vastui.campaign.plan import Candidate
from vastui.campaign.screening import Lift
from vastui.campaign.tuning import TuningOutcome
from vastui.clock import Clock


@dataclass(slots=True, eq=False)
class Slot:
    """One candidate of the campaign, with the engine's state about it."""

    run: CandidateRun
    eliminated: bool = False                # the race dropped it: its measuring stops
    committed_usd: float | None = None      # held against the budget: its worst case while alive, its bill once ended
    rented_local_at: float | None = None    # campaign clock: its create was granted (it may bill from then on)
    tuning_started: bool = False            # each candidate is tuned at most once
    tune_next: bool = False                 # stopped measuring to be tuned (kept, even if the lead moves on)
    tuning: TuningOutcome | None = None     # its tuning, once done
    certified: bool = False                 # the race certified its SLO at the last block
    destroy_sent: bool = False              # its instance's destroy went out (approved) before the teardown
    task: asyncio.Task[None] | None = None  # its life, so an abort or a halt can stop it
    screen_next: bool = False               # stopped measuring to screen the knobs on its instance
    lift: Lift | None = None                # the open change that could carry it over the SLO's floor, or under the
                                            # leader's cost (Race.may_lift)
    lift_due: str | None = None             # it missed the floor at its profile (why, in words): raced at ``lift``'s

    @property
    def cid(self) -> str:
        return self.run.cid


class Ledger:
    """The money the slots hold and have cost, on the campaign's clock (docs/architecture.md, One clock for money)."""

    def __init__(self, *, slots: Sequence[Slot], manifest: Manifest, clock: Clock) -> None:
        self._slots = slots
        self._manifest = manifest
        self._clock = clock

    def bill_usd(self, slot: Slot, *, now: float) -> float:
        """What ``slot``'s rental has cost by ``now``, by the billing model (``charges.bill_of``)."""
        return bill_of(slot.run, manifest=self._manifest, created_local=slot.rented_local_at, now=now).total_usd

    def billed_usd(self) -> dict[str, float]:
        """Per candidate id, what each rental has cost so far."""
        now = self._clock.now()
        return {slot.cid: self.bill_usd(slot, now=now) for slot in self._slots if slot.rented_local_at is not None}

    def spent_usd(self) -> float:
        """What the marketplace has billed so far: the billing model over each rental's created / running /
        destroyed moments (the marketplace's, and for destroys and now the campaign's clock, which the CLI keeps on
        the marketplace's)."""
        return sum(self.billed_usd().values())

    def reserved_usd(self) -> float:
        """The budget held for rentals: each live one's worst case, each ended one's actual cost."""
        return sum(slot.committed_usd for slot in self._slots if slot.committed_usd is not None)

    def can_afford(self, candidate: Candidate) -> bool:
        return self.reserved_usd() + candidate.max_spend_usd <= self._manifest.budget.max_usd + 1e-9

    def hold(self, slot: Slot) -> bool:
        """Called when a rent is granted (no await between the check and the hold: concurrent grants cannot
        overbook); a request still waiting for an answer holds nothing. False: no room left."""
        if not self.can_afford(slot.run.candidate):
            return False
        slot.committed_usd = slot.run.candidate.max_spend_usd
        slot.rented_local_at = self._clock.now()   # may bill from the create call on, answer or not
        return True

    def settle(self, slot: Slot) -> None:
        """The rental ended: it holds what it cost."""
        slot.committed_usd = self.bill_usd(slot, now=self._clock.now())
