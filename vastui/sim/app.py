"""The simulated Vast.ai REST API as a Starlette app (docs/api-notes.md §2 and the §8 checklist).

Serve it with ``SimServer`` on loopback, or use it in-process through ``httpx.ASGITransport``.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from vastui.sim import routes_account, routes_instances, routes_offers
from vastui.sim.filters import FilterError
from vastui.sim.market import Market
from vastui.sim.market_error import MarketError
from vastui.sim.middleware import SimMiddleware
from vastui.sim.responses import error_response


async def _market_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, MarketError)
    return error_response(exc.status, exc.code, exc.msg)


async def _filter_error(request: Request, exc: Exception) -> Response:
    return error_response(400, "invalid_query", str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return error_response(405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}.")
    return error_response(exc.status_code, "not_found", f"No such endpoint: {request.method} {request.url.path}")


def create_app(market: Market) -> Starlette:
    """The API app over ``market``; every request is recorded in ``market.request_log``."""
    app = Starlette(
        routes=[*routes_offers.ROUTES, *routes_instances.ROUTES, *routes_account.ROUTES],
        middleware=[Middleware(SimMiddleware, market=market)],
        exception_handlers={MarketError: _market_error, FilterError: _filter_error, HTTPException: _http_error},
    )
    app.router.redirect_slashes = False  # trailing slashes are part of the contract; a wrong path must 404
    app.state.market = market
    return app
