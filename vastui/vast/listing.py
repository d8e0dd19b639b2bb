"""The full instance listing: every page of ``GET /api/v1/instances/``, or an honest "incomplete".

A leak watcher that mistook a failed second page for "no more instances" would declare billing machines gone,
so a listing is complete only when the last page said there is no next one. A rejected API key is not a
partial listing; it raises.

One odd row never hides the rest: it is reported (``InstanceListing.unreadable``, by its id where readable) and the
other rows are used. Its id stays present, so nothing is proven gone for it; a row with no readable id makes the
listing incomplete (it could be any instance).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from vastui.errors import ApiError, AuthError, VastuiError
from vastui.vast.models import Instance, InstanceListing
from vastui.vast.rows import UnreadableRow
from vastui.vast.wire import Wire

wire_log = logging.getLogger("vastui.vast")
PATH = "/api/v1/instances/"
PAGE_SIZE = 25                    # the CLI's default and the server's maximum
MAX_PAGES = 4_000                 # 100 000 instances: a guard against a server that never ends


async def list_all_instances(wire: Wire) -> InstanceListing:
    """Follow ``next_token`` until it is empty; any failed or garbled page makes the listing incomplete."""
    instances: dict[int, Instance] = {}
    unreadable: list[UnreadableRow] = []
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
        except AuthError:
            raise
        except VastuiError as exc:
            return _incomplete(instances, unreadable,
                               f"page {page} of the instance listing failed: {wire.redact(exc.message)}")
        for i, row in enumerate(rows):
            where = f"row {i} of page {page}"
            try:
                instance = Instance.from_api(row, where=where)
            except ApiError as exc:
                unreadable.append(UnreadableRow.of(row, where=where, reason=wire.redact(exc.message)))
                continue
            instances.setdefault(instance.id, instance)
        if not token:
            return _finished(instances, unreadable)
        key = repr(token)
        if key in seen:
            return _incomplete(instances, unreadable, f"the marketplace repeated page token {key} (page {page})")
        seen.add(key)
    return _incomplete(instances, unreadable, f"gave up after {MAX_PAGES} pages")


def _finished(instances: dict[int, Instance], unreadable: list[UnreadableRow]) -> InstanceListing:
    """Every page read: complete, unless a row without a readable id may have been any instance."""
    for row in unreadable:
        wire_log.warning("instance listing: %s", row.describe())
    nameless = [row for row in unreadable if row.id is None]
    if nameless:
        return _incomplete(instances, unreadable, f"{len(nameless)} row(s) without a readable id "
                                                  f"(first: {nameless[0].describe()}): any instance could be one")
    rows = tuple(row for row in unreadable if row.id not in instances)
    return InstanceListing(instances=tuple(instances.values()), is_complete=True, error=None, unreadable=rows)


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


def _incomplete(instances: dict[int, Instance], unreadable: list[UnreadableRow], error: str) -> InstanceListing:
    rows = tuple(row for row in unreadable if row.id is None or row.id not in instances)
    return InstanceListing(instances=tuple(instances.values()), is_complete=False, error=error, unreadable=rows)
