"""The full instance listing: every page of ``GET /api/v1/instances/``, or an honest "incomplete".

A leak watcher that mistook a failed second page for "no more instances" would declare billing machines gone,
so a listing is complete only when the last page said there is no next one. A rejected API key is not a
partial listing; it raises.
"""

from __future__ import annotations

from collections.abc import Mapping

from vastui.errors import ApiError, AuthError, VastuiError
from vastui.vast.models import Instance, InstanceListing
from vastui.vast.wire import Wire

PATH = "/api/v1/instances/"
PAGE_SIZE = 25                    # the CLI's default and the server's maximum
MAX_PAGES = 4_000                 # 100 000 instances: a guard against a server that never ends


async def list_all_instances(wire: Wire) -> InstanceListing:
    """Follow ``next_token`` until it is empty; any failed or garbled page makes the listing incomplete."""
    instances: dict[int, Instance] = {}
    token: object = None
    seen: set[str] = set()
    for page in range(1, MAX_PAGES + 1):
        params: dict[str, object] = {"select_filters": {}, "order_by": [{"col": "id", "dir": "asc"}],
                                     "limit": PAGE_SIZE}
        if token is not None:
            params["after_token"] = token
        try:
            reply = await wire.call("GET", PATH, params=params)
            rows, token = _page(reply, page)
            parsed = [Instance.from_api(row, where=f"row {i} of page {page}") for i, row in enumerate(rows)]
        except AuthError:
            raise
        except VastuiError as exc:
            return _incomplete(instances, f"page {page} of the instance listing failed: {wire.redact(exc.message)}")
        for instance in parsed:
            instances.setdefault(instance.id, instance)
        if not token:
            return InstanceListing(instances=tuple(instances.values()), is_complete=True, error=None)
        key = repr(token)
        if key in seen:
            return _incomplete(instances, f"the marketplace repeated page token {key} (page {page})")
        seen.add(key)
    return _incomplete(instances, f"gave up after {MAX_PAGES} pages")


def _page(reply: object, page: int) -> tuple[list[Mapping[str, object]], object]:
    if not isinstance(reply, Mapping):
        raise ApiError(f"GET {PATH} page {page}: expected a JSON object, got {type(reply).__name__}")
    rows = reply.get("instances")
    if not isinstance(rows, list):
        raise ApiError(f"GET {PATH} page {page}: 'instances' should be a list, got {type(rows).__name__}")
    token = reply.get("next_token")
    if token is not None and not isinstance(token, str | int) or isinstance(token, bool):
        raise ApiError(f"GET {PATH} page {page}: 'next_token' should be a string or null")
    return rows, token


def _incomplete(instances: dict[int, Instance], error: str) -> InstanceListing:
    return InstanceListing(instances=tuple(instances.values()), is_complete=False, error=error)
