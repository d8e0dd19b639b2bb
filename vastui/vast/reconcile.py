"""Reconciling a create whose answer was lost, and telling a destroy's "no such instance" from any other 404.

A create whose answer is lost (timeout, dropped connection, 5xx, garbled 2xx) may have rented an instance, or may
still be renting one: its unique label is looked for before anything is decided, so one approval never rents twice
and an instance that is merely not listed *yet* is never declared never-rented.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from vastui.clock import Clock
from vastui.errors import ApiError, CreateFailed, CreateUncertain, NotFound, VastuiError
from vastui.vast.models import CreatedInstance, InstanceListing
from vastui.vast.wire import Wire

RECONCILE_LOOKS = 3               # listings read after a create whose answer was lost, before "possibly created"
RECONCILE_WAIT_S = 10.0           # seconds between them (the marketplace may still be creating the instance)

_NO_SUCH_INSTANCE_CODES = frozenset({"no_such_instance", "instance_not_found"})
# Destroy's other 404 shape, with no id in it (docs/api-notes.md, "Keys and the instance lifecycle")
DOCUMENTED_NOT_FOUND_CODE = "not_found"
_DOCUMENTED_NOT_FOUND = re.compile(r"^\s*instance\s+not\s+found\.?\s*$", re.IGNORECASE)
_GONE_WORDS = re.compile(r"not found|does not exist|doesn't exist|no longer exists|no such", re.IGNORECASE)


def says_no_such_instance(exc: NotFound, instance_id: int) -> bool:
    """Whether a 404 says that this instance does not exist: its error code says so, or its message names the
    instance and says it is not found. A bare "Not Found" (a wrong path, a proxy's page) says nothing of the kind."""
    if exc.code in _NO_SUCH_INSTANCE_CODES:
        return True
    text = exc.server_message
    if "endpoint" in text.lower():
        return False
    if exc.code == DOCUMENTED_NOT_FOUND_CODE and _DOCUMENTED_NOT_FOUND.match(text):
        return True   # the documented body names no id: it answers the one instance the request named
    names_it = re.search(rf"\binstance\s+(?:id\s+)?#?{instance_id}\b", text, re.IGNORECASE) is not None
    return names_it and _GONE_WORDS.search(text) is not None


async def reconcile_create(*, list_instances: Callable[[], Awaitable[InstanceListing]], clock: Clock, wire: Wire,
                           offer_id: int, label: str, cause: ApiError, may_be_pending: bool) -> CreatedInstance:
    """The create's answer was lost: look for its label before deciding anything.

    When the request reached the marketplace (a timeout, a dropped answer, a 5xx, a garbled 2xx) the create may
    still be in progress there: an instance that is not listed *yet* proves nothing. Then the listing is read
    ``RECONCILE_LOOKS`` times, ``RECONCILE_WAIT_S`` apart, and a label still missing is ``CreateUncertain``
    (the intent stays open, its cost reserved, until a later listing finds it or teardown settles it).
    Only a request that never left (the connection could not be made) is ruled out by one complete listing."""
    wire.log(logging.WARNING, f"create on offer {offer_id} lost its answer ({cause.message}); "
                              f"looking for label {label!r}")
    looks = RECONCILE_LOOKS if may_be_pending else 1
    for look in range(1, looks + 1):
        try:
            listing = await list_instances()
        except VastuiError as exc:
            listing = InstanceListing(instances=(), is_complete=False, error=exc.message)
        found = sorted({inst.id for inst in listing.with_label(label)}
                       | {r.id for r in listing.unreadable if r.label == label and r.id is not None})
        if len(found) == 1:
            return CreatedInstance(instance_id=found[0], offer_id=offer_id, label=label, reconciled=True)
        if len(found) > 1:
            ids = ", ".join(str(instance_id) for instance_id in found)
            raise CreateUncertain(wire.redact(
                f"create on offer {offer_id} lost its answer and several instances carry label {label!r} "
                f"({ids}); labels must be unique per create — check them before doing anything else"),
                label=label, offer_id=offer_id, status=cause.status)
        if not listing.is_complete or look == looks:
            break
        await clock.sleep(RECONCILE_WAIT_S)
    if listing.is_complete and not may_be_pending:
        raise CreateFailed(wire.redact(
            f"create on offer {offer_id} failed ({cause.message}); the request never reached the marketplace "
            f"and a complete listing shows no instance labelled {label!r}, so nothing was rented. "
            f"Not retried: renting again needs a new approval."),
            status=cause.status, title="Rent failed")
    if listing.is_complete:
        raise CreateUncertain(wire.redact(
            f"create on offer {offer_id} lost its answer ({cause.message}) and no instance labelled {label!r} "
            f"is listed yet ({looks} complete listings over {(looks - 1) * RECONCILE_WAIT_S:.0f} s); the "
            f"marketplace may still be creating it, so it is possibly billing until a listing finds it or "
            f"teardown proves it absent"),
            label=label, offer_id=offer_id, status=cause.status)
    raise CreateUncertain(wire.redact(
        f"create on offer {offer_id} lost its answer ({cause.message}) and the instance listing is incomplete "
        f"({listing.error}); an instance labelled {label!r} was possibly created and may be billing"),
        label=label, offer_id=offer_id, status=cause.status)

