"""Instance routes: the v1 listing, show, state/label changes, destroy, reboot/recycle, prepay, bids, logs, ssh."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from vastui.sim.market import Market
from vastui.sim.market_error import MarketError
from vastui.sim.responses import int_list, json_body, json_response, note_targets, number


def _market(request: Request) -> Market:
    market: Market = request.app.state.market
    return market


def _instance_id(request: Request) -> int:
    instance_id = int(request.path_params["instance_id"])
    note_targets(request, [instance_id])
    return instance_id


def _json_param(request: Request, name: str) -> Any:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise MarketError(400, "invalid_args", f"Query parameter {name} is not valid JSON.") from exc


async def list_v1(request: Request) -> Response:
    envelope = await _market(request).list_instances(
        select_filters=_json_param(request, "select_filters"), order_by=_json_param(request, "order_by"),
        limit=_json_param(request, "limit"), after_token=request.query_params.get("after_token"),
        select_cols=_json_param(request, "select_cols"),
    )
    return json_response(envelope)


async def filters(request: Request) -> Response:
    rows = await _market(request).instance_rows()
    seen = {(r["actual_status"], r["verification"], r["gpu_name"]) for r in rows}
    return json_response({"filters": [{"actual_status": s, "verification": v, "gpu_name": g}
                                      for s, v, g in sorted(seen)]})


async def show(request: Request) -> Response:
    row = await _market(request).show_instance(int(request.path_params["instance_id"]))
    return json_response({"instances": row})


async def _apply_changes(market: Market, ids: list[int], body: dict[str, Any]) -> None:
    if "state" not in body and "label" not in body:
        raise MarketError(400, "invalid_args", "Nothing to change: send 'state' and/or 'label'.")
    if "label" in body:
        await market.set_label(ids, None if body["label"] is None else str(body["label"]))
    if "state" in body:
        await market.set_state(ids, str(body["state"]))


async def update(request: Request) -> Response:
    instance_id = _instance_id(request)
    await _apply_changes(_market(request), [instance_id], await json_body(request))
    return json_response({"success": True})


async def update_many(request: Request) -> Response:
    body = await json_body(request)
    ids = int_list(body.get("ids"), name="ids")
    note_targets(request, ids)
    await _apply_changes(_market(request), ids, body)
    return json_response({"success": True})


async def destroy(request: Request) -> Response:
    await _market(request).destroy([_instance_id(request)])
    return json_response({"success": True})


async def destroy_many(request: Request) -> Response:
    body = await json_body(request)
    ids = int_list(body.get("instance_ids"), name="instance_ids")
    note_targets(request, ids)
    await _market(request).destroy(ids)
    return json_response({"success": True})


async def reboot(request: Request) -> Response:
    await _market(request).reboot(_instance_id(request))
    return json_response({"success": True})


async def recycle(request: Request) -> Response:
    await _market(request).reboot(_instance_id(request), recycle=True)
    return json_response({"success": True})


async def prepay(request: Request) -> Response:
    instance_id = _instance_id(request)
    amount = number((await json_body(request)).get("amount"), name="amount")
    timescale, discount = await _market(request).prepay(instance_id, amount)
    return json_response({"success": True, "timescale": timescale, "discount_rate": discount})


async def balance(request: Request) -> Response:
    return json_response(await _market(request).deposit(int(request.path_params["instance_id"])))


async def bid_price(request: Request) -> Response:
    instance_id = _instance_id(request)
    raw = (await json_body(request)).get("price")
    await _market(request).change_bid(instance_id, None if raw is None else number(raw, name="price"))
    return json_response({"success": True})


def _result_url(request: Request, token: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/_results/{token}"


async def request_logs(request: Request) -> Response:
    instance_id = _instance_id(request)
    body = await json_body(request)
    tail = body.get("tail")
    token = await _market(request).request_logs(
        instance_id, tail=None if tail in (None, "") else int(number(tail, name="tail")),
        grep=None if body.get("filter") in (None, "") else str(body["filter"]),
        daemon=str(body.get("daemon_logs", "")).lower() == "true",
    )
    return json_response({"success": True, "result_url": _result_url(request, token)})


async def command(request: Request) -> Response:
    instance_id = _instance_id(request)
    cmd = str((await json_body(request)).get("command", ""))
    market = _market(request)
    if await market.show_instance(instance_id) is None:
        raise MarketError(404, "no_such_instance", f"Instance {instance_id} not found.")
    token = market.put_result(f"sim: '{cmd}' is not run by the simulated API; connect over SSH instead.\n")
    return json_response({"success": True, "result_url": _result_url(request, token),
                          "writeable_path": f"/tmp/vast-exec-{instance_id}"})


async def attach_ssh(request: Request) -> Response:
    instance_id = _instance_id(request)
    key = str((await json_body(request)).get("ssh_key", ""))
    key_id = await _market(request).attach_key(instance_id, key)
    return json_response({"success": True, "key_id": key_id, "msg": f"Key attached to instance {instance_id}."})


async def detach_ssh(request: Request) -> Response:
    instance_id = _instance_id(request)
    await _market(request).detach_key(instance_id, int(request.path_params["key_id"]))
    return json_response({"success": True, "msg": f"Key detached from instance {instance_id}."})


_I = "/api/v0/instances"
ROUTES = [
    Route("/api/v1/instances/", list_v1, methods=["GET"]),
    Route(f"{_I}/filters/", filters, methods=["GET"]),
    Route(f"{_I}/", update_many, methods=["PUT"]),
    Route(f"{_I}/", destroy_many, methods=["DELETE"]),
    Route(f"{_I}/{{instance_id:int}}/", show, methods=["GET"]),
    Route(f"{_I}/{{instance_id:int}}/", update, methods=["PUT"]),
    Route(f"{_I}/{{instance_id:int}}/", destroy, methods=["DELETE"]),
    Route(f"{_I}/reboot/{{instance_id:int}}/", reboot, methods=["PUT"]),
    Route(f"{_I}/recycle/{{instance_id:int}}/", recycle, methods=["PUT"]),
    Route(f"{_I}/prepay/{{instance_id:int}}/", prepay, methods=["PUT"]),
    Route(f"{_I}/balance/{{instance_id:int}}/", balance, methods=["GET"]),
    Route(f"{_I}/bid_price/{{instance_id:int}}/", bid_price, methods=["PUT"]),
    Route(f"{_I}/request_logs/{{instance_id:int}}/", request_logs, methods=["PUT"]),
    Route(f"{_I}/command/{{instance_id:int}}/", command, methods=["PUT"]),
    Route(f"{_I}/{{instance_id:int}}/ssh/", attach_ssh, methods=["POST"]),
    Route(f"{_I}/{{instance_id:int}}/ssh/{{key_id:int}}/", detach_ssh, methods=["DELETE"]),
]
