"""The leak watch as a service (``vastui watch``): a round every few minutes that reconciles the account's whole
listing with the store, records what it saw, and tells a person what needs one.

Each round reads the account (credit; a rejected key shows here first) and the full instance listing, judges it
with ``find_leaks`` and raises an alert for each condition: a leak of vastui's, an instance vastui did not make, a
runway shorter than the config's, an API key that stopped working, and a listing that failed round after round
(the watch is blind: it must say so rather than fall silent). An alert is kept in the store before it is told
(``raise_alert``: one condition alerts once per quiet period, across restarts and across two watches on one team
store), written to the log at once, and delivered to the webhook by whichever watch claims it; one that the webhook
refused stays undelivered and is tried again each round, so an outage of either end loses none.

A standing approval in the config (``[watch.destroy]``, ``vastui.config.StandingDestroy``) lets the watch destroy
a leak only when every limit holds: judged a leak on two successive complete listings, running at least
``older_than`` since its start, billing at most ``max_usd_per_h``, its label matching, and vastui's own unless
the approval names instances that are not. Each destroy is approved by ``ListedDestroyApprover`` for exactly that
round's ids and written to the audit log like any other (docs/architecture.md, The leak watch).
"""

from __future__ import annotations

import asyncio
import enum
import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from vastui.campaign.approvers import AuditedApprover
from vastui.campaign.cleanup import TeardownReport
from vastui.campaign.ports import CampaignStore, Marketplace
from vastui.campaign.watch import (
    REASON_TEXT,
    Leak,
    LeakReport,
    ListedDestroyApprover,
    destroy_leaks,
    find_leaks,
    read_listing,
)
from vastui.clock import Clock
from vastui.config import StandingDestroy, WatchSettings
from vastui.errors import ApiError, AuthError, VastuiError
from vastui.events import EventBus
from vastui.store import WatchAlert, WatchRound
from vastui.vast.models import User

CLAIM_S = 120.0   # how long a claimed alert is this watch's to deliver before another may try it
MAX_FAILED_ROUNDS = 3   # rounds failing in a row (the store unreachable) before the watch stops to be restarted


class WatchedMarket(Marketplace, Protocol):
    async def get_user(self) -> User: ...


class WatchStore(CampaignStore, Protocol):
    async def record_watch_round(self, *, checked_at: float, verdict: str, listed_count: int, leaked_count: int,
                                 unowned_count: int, burn_usd_per_h: float | None, credit_usd: float | None,
                                 error: str | None) -> WatchRound: ...

    async def raise_alert(self, *, alert_key: str, kind: str, text: str, instance_id: int | None, at: float,
                          quiet_s: float) -> WatchAlert | None: ...

    async def undelivered_alerts(self) -> list[WatchAlert]: ...

    async def claim_alert(self, row_id: int, *, at: float, until: float) -> bool: ...

    async def settle_alert(self, row_id: int, *, delivered_at: float | None, error: str | None = None) -> None: ...


class AlertKind(enum.StrEnum):
    LEAK = "leak"                       # one of vastui's instances bills without a reason (watch.LeakReason says why)
    UNOWNED = "unowned"                 # an instance vastui did not make (someone's, or nobody's)
    LOW_RUNWAY = "low_runway"           # the credit lasts less than the config's runway at the current burn
    KEY_REJECTED = "key_rejected"       # the API key stopped working: the watch sees nothing
    BLIND = "blind"                     # the listing failed round after round: leaks may be hiding
    DESTROYED = "destroyed"             # the standing approval destroyed a leak
    DESTROY_FAILED = "destroy_failed"   # it tried and the instance is still listed (tried again next round)


@dataclass(frozen=True, slots=True)
class Condition:
    """Something a round found worth telling; ``key`` names it across rounds (one instance, the runway, the key)."""

    key: str
    kind: AlertKind
    text: str
    instance_id: int | None = None


class AlertSink(Protocol):
    """Where alerts go beyond the log (a webhook). ``deliver`` raises when the alert was not taken."""

    async def deliver(self, alert: WatchAlert) -> None: ...


@dataclass(slots=True)
class RoundResult:
    """What one round saw and did."""

    report: LeakReport
    user: User | None
    key_error: str | None
    recorded: WatchRound
    raised: list[WatchAlert] = field(default_factory=list)
    delivered: list[int] = field(default_factory=list)
    undelivered: int = 0
    destroyed: TeardownReport | None = None

    def summary(self) -> str:
        credit = "" if self.user is None or self.user.credit is None else f"; credit ${self.user.credit:,.2f}"
        burn = "" if self.recorded.burn_usd_per_h is None else f", all instances ${self.recorded.burn_usd_per_h:.3f}/h"
        raised = f"; {len(self.raised)} new alert(s)" if self.raised else ""
        waiting = f"; {self.undelivered} alert(s) not delivered yet" if self.undelivered else ""
        destroyed = ("" if self.destroyed is None else
                     f"; destroyed under the standing approval: {[g.instance_id for g in self.destroyed.gone]}")
        return f"{self.report.summary()}{burn}{credit}{destroyed}{raised}{waiting}"


def policy_refusal(policy: StandingDestroy, leak: Leak, *, now: float) -> str | None:
    """Why the standing approval does not cover destroying ``leak`` now (None: it does)."""
    if leak.is_unowned and not policy.include_unowned:
        return "not vastui's, and the approval does not include unowned instances"
    if leak.burn_usd_per_h is None:
        return "its price is not listed"
    if leak.burn_usd_per_h > policy.max_usd_per_h:
        return f"it bills ${leak.burn_usd_per_h:.3f}/h, over the approval's ${policy.max_usd_per_h:g}/h"
    if leak.started_at is None:
        return "its start is not listed, so its age is unknown"
    if now - leak.started_at < policy.older_than_s:
        return f"it has run {(now - leak.started_at) / 60:.0f} min, under the approval's {policy.older_than_s / 60:g}"
    if not any(fnmatch.fnmatchcase(leak.label or "", pattern) for pattern in policy.labels):
        return f"its label {leak.label or '(none)'} matches none of {', '.join(policy.labels)}"
    return None


class Lookout:
    """Rounds of the leak watch against one account and one store (``round`` once, ``run`` until stopped)."""

    def __init__(self, *, market: WatchedMarket, store: WatchStore, clock: Clock, settings: WatchSettings,
                 sink: AlertSink | None, log: Callable[[str], None], destroy: bool = True,
                 poll_s: float = 5.0, who: str = "vastui watch") -> None:
        """``clock`` is the marketplace's (ages, costs, the quiet period); ``destroy`` False keeps the standing
        approval unused (it is still judged and logged); ``poll_s`` paces the listings that prove a destroy."""
        self._market = market
        self._store = store
        self._clock = clock
        self._settings = settings
        self._sink = sink
        self._log = log
        self._destroy = destroy and settings.destroy is not None
        self._poll_s = poll_s
        self._who = who
        self._failed_rounds = 0
        self._leaks_before: frozenset[int] | None = None   # the last complete round's leaks (None: none yet)
        # destroys sent but not proven: the complete listings that have missed each since (two prove it gone)
        self._unproven: dict[int, tuple[Leak, list[float]]] = {}

    async def round(self) -> RoundResult:
        user, key_error = await self._read_account()
        listing = await read_listing(self._market)
        report = await find_leaks(market=self._market, store=self._store, clock=self._clock, listing=listing)
        now = self._clock.now()
        burn = listing.burn_usd_per_h if listing.is_complete else None
        credit = user.credit if user is not None else None
        recorded = await self._store.record_watch_round(
            checked_at=now, verdict=str(report.verdict), listed_count=report.listed_count,
            leaked_count=len(report.leaked), unowned_count=len(report.unowned), burn_usd_per_h=burn,
            credit_usd=credit, error=report.error)
        self._failed_rounds = 0 if report.is_complete else self._failed_rounds + 1
        result = RoundResult(report=report, user=user, key_error=key_error, recorded=recorded)
        conditions = [*self._conditions(report, now=now, key_error=key_error, burn=burn, credit=credit)]
        if listing.is_complete:
            conditions.extend(await self._follow_unproven(listing.present_ids, now=now))
        await self._raise(conditions, result, now=now)
        if report.is_complete:
            targets = self._covered(report, now=now)
            self._leaks_before = frozenset(leak.instance_id for leak in report.leaks)
            if targets:
                result.destroyed = await self._destroy_covered(targets)
                await self._raise(list(self._destroy_conditions(targets, result.destroyed)), result,
                                  now=self._clock.now())
        await self._deliver(result)
        return result

    async def run(self, *, stop: asyncio.Event, rounds: int | None = None,
                  on_round: Callable[[RoundResult], None] | None = None) -> int:
        """Rounds every ``interval`` until ``stop`` is set (or ``rounds`` are done); returns how many ran. A round
        that fails (the store unreachable, say) is logged and the next one tries again; after
        ``MAX_FAILED_ROUNDS`` in a row the error is raised, so a service manager restarts the watch afresh."""
        done = failed = 0
        while not stop.is_set() and (rounds is None or done < rounds):
            try:
                result = await self.round()
            except VastuiError as exc:
                failed += 1
                if failed >= MAX_FAILED_ROUNDS:
                    self._log(f"round failed {failed} times in a row: {exc}; stopping")
                    raise
                self._log(f"round failed: {exc}; trying again in {self._settings.interval_s / 60:g} min")
            else:
                failed = 0
                if on_round is not None:
                    on_round(result)
            done += 1
            if rounds is not None and done >= rounds:
                break
            await _sleep_unless(stop, self._clock, self._settings.interval_s)
        return done

    async def _read_account(self) -> tuple[User | None, str | None]:
        try:
            return await self._market.get_user(), None
        except AuthError as exc:
            return None, str(exc)
        except ApiError:
            return None, None   # the listing's own failure tells whether the watch is blind

    def _conditions(self, report: LeakReport, *, now: float, key_error: str | None, burn: float | None,
                    credit: float | None) -> list[Condition]:
        found: list[Condition] = []
        if key_error is not None:
            found.append(Condition("api-key", AlertKind.KEY_REJECTED,
                                   f"the API key stopped working; the watch sees nothing until it does: {key_error}"))
        elif self._failed_rounds >= self._settings.blind_rounds:
            found.append(Condition("blind", AlertKind.BLIND,
                                   f"the instance listing has failed {self._failed_rounds} rounds in a row; leaks "
                                   f"may be billing unseen: {report.error}"))
        for leak in report.leaks:
            if leak.is_unowned:
                found.append(Condition(f"unowned:{leak.instance_id}", AlertKind.UNOWNED,
                                       f"not vastui's: {_describe(leak, now=now)}", leak.instance_id))
            else:
                found.append(Condition(f"leak:{leak.instance_id}", AlertKind.LEAK,
                                       f"leak: {_describe(leak, now=now)}: {REASON_TEXT[leak.reason]} "
                                       f"({leak.detail})", leak.instance_id))
        if credit is not None and burn and credit / burn < self._settings.runway_h:
            found.append(Condition("runway", AlertKind.LOW_RUNWAY,
                                   f"low runway: ${credit:,.2f} of credit lasts {max(0.0, credit) / burn:.1f} h at "
                                   f"the current ${burn:.3f}/h (the watch warns under "
                                   f"{self._settings.runway_h:g} h)"))
        return found

    def _covered(self, report: LeakReport, *, now: float) -> list[Leak]:
        """The leaks the standing approval covers this round: judged leaks on the last complete listing too."""
        policy = self._settings.destroy
        if policy is None:
            return []
        covered: list[Leak] = []
        for leak in report.leaks:
            if policy_refusal(policy, leak, now=now) is not None:
                continue   # outside the approval's limits: told by the leak's own alert, not each round
            if self._leaks_before is None or leak.instance_id not in self._leaks_before:
                self._log(f"standing approval: {leak.instance_id} is first seen leaked this round; it is destroyed "
                          "once the next listing agrees")
            elif not self._destroy:
                self._log(f"standing approval: would destroy {leak.instance_id}, but destroying is off "
                          "(--no-destroy)")
            else:
                covered.append(leak)
        return covered

    async def _destroy_covered(self, targets: Sequence[Leak]) -> TeardownReport:
        policy = self._settings.destroy
        assert policy is not None
        ids = [leak.instance_id for leak in targets]
        self._log(f"standing approval: destroying {ids} ({policy.describe()})")
        approver = AuditedApprover(
            ListedDestroyApprover(ids, clock=self._clock, granted_by=f"standing approval: {policy.source}"),
            audit=self._store, clock=self._clock)
        return await destroy_leaks(market=self._market, store=self._store, approver=approver, clock=self._clock,
                                   bus=EventBus(), leaks=targets, poll_s=self._poll_s)

    def _destroy_conditions(self, targets: Sequence[Leak], outcome: TeardownReport) -> list[Condition]:
        gone = {g.instance_id for g in outcome.gone}
        found: list[Condition] = []
        for leak in targets:
            if leak.instance_id in gone:
                self._unproven.pop(leak.instance_id, None)
                found.append(_destroyed(leak, "destroyed under the standing approval"))
                continue
            # its destroy may have landed with its answer lost: later listings tell (``_follow_unproven``)
            self._unproven[leak.instance_id] = (leak, [])
            why = outcome.destroy_errors.get(leak.instance_id) or "; ".join(outcome.errors) or "still listed"
            found.append(Condition(f"destroy-failed:{leak.instance_id}", AlertKind.DESTROY_FAILED,
                                   f"could not prove instance {leak.instance_id} destroyed under the standing "
                                   f"approval ({why}); the next rounds try again", leak.instance_id))
        return found

    async def _follow_unproven(self, present: frozenset[int], *, now: float) -> list[Condition]:
        """Destroys not proven when sent: two complete listings that miss one prove it gone (recorded and told);
        one listed again is a leak again, which the approval retries."""
        found: list[Condition] = []
        for instance_id, (leak, missed) in list(self._unproven.items()):
            if instance_id in present:
                self._unproven[instance_id] = (leak, [])
                continue
            missed.append(now)
            if len(missed) >= 2:
                del self._unproven[instance_id]
                await self._store.record_gone(instance_id=instance_id, missed_listing_at=missed, at=now)
                found.append(_destroyed(leak, "gone after the standing approval's destroy (two listings since "
                                              "miss it)"))
        return found

    async def _raise(self, conditions: Sequence[Condition], result: RoundResult, *, now: float) -> None:
        for condition in conditions:
            alert = await self._store.raise_alert(alert_key=condition.key, kind=str(condition.kind),
                                                  text=f"{self._who}: {condition.text}",
                                                  instance_id=condition.instance_id, at=now,
                                                  quiet_s=self._settings.quiet_s)
            if alert is not None:
                self._log(f"ALERT [{alert.kind}] {condition.text}")
                result.raised.append(alert)

    async def _deliver(self, result: RoundResult) -> None:
        """Every undelivered alert, oldest first, to the sink (with none, the log was the delivery); the first
        refusal ends the round's deliveries, so they keep their order."""
        pending = await self._store.undelivered_alerts()
        for index, alert in enumerate(pending):
            now = self._clock.now()
            if not await self._store.claim_alert(alert.row_id, at=now, until=now + CLAIM_S):
                continue   # another watch on this store is delivering it
            if self._sink is None:
                await self._store.settle_alert(alert.row_id, delivered_at=now)
                result.delivered.append(alert.row_id)
                continue
            try:
                await self._sink.deliver(alert)
            except (VastuiError, OSError) as exc:
                await self._store.settle_alert(alert.row_id, delivered_at=None, error=str(exc))
                result.undelivered = len(pending) - index
                self._log(f"webhook: alert {alert.row_id} not delivered ({exc}); "
                          f"{result.undelivered} wait for the next round")
                return
            await self._store.settle_alert(alert.row_id, delivered_at=self._clock.now())
            result.delivered.append(alert.row_id)


def _destroyed(leak: Leak, how: str) -> Condition:
    return Condition(f"destroyed:{leak.instance_id}", AlertKind.DESTROYED,
                     f"{how}: instance {leak.instance_id} ({leak.label or 'no label'}), {REASON_TEXT[leak.reason]}, "
                     f"which billed ${leak.burn_usd_per_h or 0:.3f}/h", leak.instance_id)


def _describe(leak: Leak, *, now: float) -> str:
    label = f" ({leak.label})" if leak.label else ""
    age = "" if leak.started_at is None else f", up {max(0.0, now - leak.started_at) / 3600:.1f} h"
    price = "" if leak.burn_usd_per_h is None else f", billing ${leak.burn_usd_per_h:.3f}/h"
    spent = "" if leak.accrued_usd is None else f", ${leak.accrued_usd:.2f} so far"
    return f"instance {leak.instance_id}{label}{age}{price}{spent}"


async def _sleep_unless(stop: asyncio.Event, clock: Clock, seconds: float) -> None:
    """Sleep ``seconds`` on ``clock``, or less if ``stop`` is set meanwhile."""
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, stopper):
            task.cancel()
        await asyncio.gather(sleeper, stopper, return_exceptions=True)
