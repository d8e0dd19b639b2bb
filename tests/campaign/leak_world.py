"""Setting up a leak watch's world on the simulated market: campaigns in the store, instances rented straight on
the market (by hand, or as a campaign does: intent first, then the create with its label)."""

from __future__ import annotations

from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.store import Store


async def rent(market: Market, label: str | None) -> tuple[int, int]:
    """Rent a free machine straight on the market (setup, not under test): (instance id, offer id)."""
    machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
    body = {"image": "pytorch/pytorch", "disk": 10, "label": label, "runtype": "ssh"}
    state = await market.create_instance(machine.offer_id, CreateRequest.from_body(body))
    return state.id, machine.offer_id


async def new_campaign(store: Store, campaign_id: str, *, at: float, finished: bool = False,
                       phase: str = "measuring", deadline_at: float | None = None) -> None:
    await store.save_manifest(digest="sha256:" + "0" * 64, name="w", toml_text="[workload]\n", stored_at=at)
    await store.create_campaign(campaign_id=campaign_id, manifest_digest="sha256:" + "0" * 64, created_at=at,
                                phase=phase, deadline_at=deadline_at)
    if finished:
        await store.finish_campaign(campaign_id=campaign_id, phase="finished", at=at)


async def rent_owned(market: Market, store: Store, campaign_id: str, *, at: float, deadline_at: float | None,
                     candidate: str = "c0", bind: bool = True) -> int:
    """What a campaign does: write the intent, create with its label, bind the id."""
    machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
    label = f"vastui-{campaign_id}-{candidate}-{machine.offer_id}"
    intent = await store.record_intent(campaign_id=campaign_id, offer_id=machine.offer_id, label=label, at=at,
                                       deadline_at=deadline_at)
    body = {"image": "pytorch/pytorch", "disk": 10, "label": label, "runtype": "ssh"}
    state = await market.create_instance(machine.offer_id, CreateRequest.from_body(body))
    if bind:
        await store.bind_intent(intent_id=intent.intent_id, instance_id=state.id, at=at)
    return state.id
