"""How the simulated API answers: JSON with ``Content-Type: application/json`` exactly (the official CLI checks
it verbatim on searches), the ``{"success": false, "error", "msg"}`` error shape, and tolerant body parsing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from vastui.sim.market_error import MarketError

JSON = "application/json"


def json_response(data: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(json.dumps(data), status_code=status, media_type=JSON, headers=dict(headers or {}))


def error_response(status: int, code: str, msg: str, *, headers: Mapping[str, str] | None = None) -> Response:
    return json_response({"success": False, "error": code, "msg": msg}, status=status, headers=headers)


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; an empty body counts as ``{}`` (GET and some clients send none)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise MarketError(400, "invalid_json", "The request body is not valid JSON.") from exc
    if not isinstance(body, dict):
        raise MarketError(400, "invalid_json", "The request body must be a JSON object.")
    return body


def note_targets(request: Request, ids: Iterable[int]) -> None:
    """Tell the request log which offers or instances this request acted on."""
    request.scope.setdefault("state", {})["target_ids"] = tuple(int(i) for i in ids)


def int_list(value: Any, *, name: str) -> list[int]:
    """A JSON list of ids; MarketError 400 otherwise."""
    if not isinstance(value, list) or not value:
        raise MarketError(400, "invalid_args", f"{name} must be a non-empty list of ids.")
    try:
        return [int(v) for v in value]
    except (TypeError, ValueError) as exc:
        raise MarketError(400, "invalid_args", f"{name} must hold integer ids.") from exc


def number(value: Any, *, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise MarketError(400, "invalid_args", f"{name} must be a number.") from exc
