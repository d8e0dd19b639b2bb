"""The plan's reserves: offers printed (and approved) with the plan, rented only in a candidate's place.

A reserve takes the place of a candidate whose offer vanished before its rent (one of the same GPU model when there
is one), or of a candidate passed over unrented because its chance of beating the measured leader was too small (the best
reserve by prior whose chance is not): a slot the plan gave to an unlikely winner goes to the next-best one instead
of going unused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from vastui.campaign.plan import Candidate


class Reserves:
    """The unused reserves, best prior first; each is handed out at most once."""

    def __init__(self, reserves: Sequence[Candidate]) -> None:
        self._left = list(reserves)

    def __len__(self) -> int:
        return len(self._left)

    def for_vanished(self, candidate: Candidate) -> Candidate | None:
        """A reserve of ``candidate``'s GPU model when one is left (the plan wanted that model measured), else the
        best one left by prior (the next-best offer the plan knows; docs/method.md, Waves)."""
        for index, reserve in enumerate(self._left):
            if reserve.offer.gpu_name == candidate.offer.gpu_name:
                return self._left.pop(index)
        return self._left.pop(0) if self._left else None

    async def for_passed_over(self, hopeless: Callable[[Candidate], Awaitable[str | None]]) -> Candidate | None:
        """The best reserve by prior that ``hopeless`` does not rule out (it says why it does); those it rules out
        are dropped."""
        while self._left:
            reserve = self._left.pop(0)
            if await hopeless(reserve) is None:
                return reserve
        return None
