"""Offer routes: search (``POST /bundles/``, ``PUT /search/asks/``), GPU names, and renting (``/asks/``)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.market_error import MarketError
from vastui.sim.responses import JSON, int_list, json_body, json_response, note_targets


def _market(request: Request) -> Market:
    market: Market = request.app.state.market
    return market


async def bundles(request: Request) -> Response:
    query = await json_body(request)
    return Response(await _market(request).search_json(query), media_type=JSON)


async def search_asks(request: Request) -> Response:
    body = await json_body(request)
    query = body.get("q", {})
    if not isinstance(query, dict):
        raise MarketError(400, "invalid_args", "q must be a JSON object.")
    offers = await _market(request).search(query)
    cols = body.get("select_cols", ["*"])
    if isinstance(cols, list) and cols and "*" not in cols:
        offers = [{str(c): offer.get(str(c)) for c in cols} for offer in offers]
    return json_response({"offers": offers})


async def gpu_names(request: Request) -> Response:
    names = sorted({m.gpu_name for m in _market(request).world.machines})
    return json_response({"gpu_names": names})


async def create(request: Request) -> Response:
    offer_id = int(request.path_params["offer_id"])
    note_targets(request, [offer_id])
    body = await json_body(request)
    state = await _market(request).create_instance(offer_id, CreateRequest.from_body(body))
    return json_response({"success": True, "new_contract": state.id, "instance_api_key": state.api_key})


async def create_bulk(request: Request) -> Response:
    body = await json_body(request)
    offer_ids = int_list(body.get("ids"), name="ids")
    note_targets(request, offer_ids)
    created, failed = await _market(request).create_many(offer_ids, CreateRequest.from_body(body))
    result: dict[str, Any] = {"success": not failed, "new_contracts": created}
    if failed:
        result["msg"] = "; ".join(failed)
    return json_response(result)


ROUTES = [
    Route("/api/v0/bundles/", bundles, methods=["POST"]),
    Route("/api/v0/search/asks/", search_asks, methods=["PUT"]),
    Route("/api/v0/gpu_names/unique/", gpu_names, methods=["GET"]),
    Route("/api/v0/asks/bulk/", create_bulk, methods=["POST"]),
    Route("/api/v0/asks/{offer_id:int}/", create, methods=["PUT"]),
]
