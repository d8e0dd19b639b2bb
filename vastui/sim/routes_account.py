"""Account routes: the current user, credit transfers, account SSH keys, and the unauthenticated result URLs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from vastui.sim.market import Market
from vastui.sim.responses import error_response, json_body, json_response, note_targets, number


def _market(request: Request) -> Market:
    market: Market = request.app.state.market
    return market


async def current_user(request: Request) -> Response:
    return json_response(await _market(request).user())


async def transfer_credit(request: Request) -> Response:
    body = await json_body(request)
    amount = number(body.get("amount"), name="amount")
    refusal = await _market(request).transfer_credit(recipient=str(body.get("recipient") or ""), amount_usd=amount)
    if refusal is not None:
        return json_response({"success": False, "error": "transfer_refused", "msg": refusal})
    return json_response({"success": True, "msg": f"Sent {amount} to {body.get('recipient')}."})


async def list_keys(request: Request) -> Response:
    # An account without keys answers 404, not an empty list (docs/api-notes.md §3.13).
    keys = [key.as_json() for key in _market(request).account.ssh_keys.values()]
    if not keys:
        return error_response(404, "no_ssh_keys", "No SSH keys found for this account.")
    return json_response(keys)


async def create_key(request: Request) -> Response:
    market = _market(request)
    key = market.account.add_key(str((await json_body(request)).get("ssh_key", "")), at=market.clock.now())
    note_targets(request, [key.id])
    return json_response({"success": True, **key.as_json()})


async def update_key(request: Request) -> Response:
    key_id = int(request.path_params["key_id"])
    note_targets(request, [key_id])
    key = _market(request).account.update_key(key_id, str((await json_body(request)).get("ssh_key", "")))
    return json_response({"success": True, **key.as_json()})


async def delete_key(request: Request) -> Response:
    key_id = int(request.path_params["key_id"])
    note_targets(request, [key_id])
    _market(request).account.delete_key(key_id)
    return json_response({"success": True})


async def result(request: Request) -> Response:
    # Presigned-URL stand-in: no auth, 404 until the log upload has "landed".
    text = _market(request).log_result(request.path_params["token"])
    if text is None:
        return PlainTextResponse("Not ready", status_code=404)
    return PlainTextResponse(text)


ROUTES = [
    Route("/api/v0/users/current", current_user, methods=["GET"]),
    Route("/api/v0/commands/transfer_credit/", transfer_credit, methods=["PUT"]),
    Route("/api/v0/ssh/", list_keys, methods=["GET"]),
    Route("/api/v0/ssh/", create_key, methods=["POST"]),
    Route("/api/v0/ssh/{key_id:int}/", update_key, methods=["PUT"]),
    Route("/api/v0/ssh/{key_id:int}/", delete_key, methods=["DELETE"]),
    Route("/_results/{token}", result, methods=["GET"]),
]
