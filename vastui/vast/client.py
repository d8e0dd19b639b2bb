"""``HttpVastClient``: the only door to the marketplace, real or simulated.

Reads return typed models; raw dicts never leave this package. Every mutating method checks and consumes its
``Approval`` before any I/O, writes an audit record that the call is going out, then one of its outcome. Create is never retried
blindly: when the answer to ``PUT /asks/{id}/`` is lost (timeout, dropped connection, 5xx), the client lists
the instances and looks for the create's unique label before deciding, so one approval can never rent twice.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TypeVar

import httpx

from vastui.approval import (
    Action,
    Approval,
    AuditKind,
    AuditRecord,
    AuditSink,
    instance_target,
    offer_target,
    recipient_target,
    require,
)
from vastui.clock import Clock
from vastui.config import Redactor, Secret, redact_url_passwords
from vastui.errors import (
    ApiError,
    ApprovalRequired,
    AuthError,
    CreateFailed,
    CreateUncertain,
    NotFound,
    TransportError,
    VastuiError,
)
from vastui.vast.backoff import RetryPolicy
from vastui.vast.listing import list_all_instances
from vastui.vast.models import (
    Answered,
    CreatedInstance,
    Instance,
    InstanceListing,
    Offer,
    OfferRows,
    Prepaid,
    SshKey,
    User,
)
from vastui.vast.query import build_search_body
from vastui.vast.reconcile import RECONCILE_LOOKS, RECONCILE_WAIT_S, reconcile_create, says_no_such_instance
from vastui.vast.rows import UnreadableRow
from vastui.vast.wire import GarbledReply, NotSent, Retry, Wire

__all__ = ["RECONCILE_LOOKS", "RECONCILE_WAIT_S", "CreateFailed", "CreateUncertain", "HttpVastClient",
           "ssh_key_target"]  # the create outcomes and their reconciliation's pace, named where create lives

T = TypeVar("T")
DEFAULT_RUNTYPE = "ssh_direc ssh_proxy"
LOG_POLLS = 30
LOG_POLL_INTERVAL_S = 0.3


def ssh_key_target(public_key: str) -> str:
    """The approval target of registering an SSH public key: a short digest of the key."""
    return "ssh_key:" + hashlib.sha256(public_key.strip().encode()).hexdigest()[:16]


class HttpVastClient:
    """The Vast.ai REST API (docs/api-notes.md §2) over one ``httpx.AsyncClient``. Use as an async context manager."""

    def __init__(self, *, base_url: str, api_key: Secret | None, clock: Clock,
                 transport: httpx.AsyncBaseTransport | None = None, timeout_s: float = 30.0,
                 max_attempts: int = 4, audit: AuditSink | None = None, key_source: str | None = None) -> None:
        """``key_source`` says where the key came from (``--api-key``, ``VAST_API_KEY``, the key file's path):
        a rejected key's error names it."""
        self._clock = clock
        self._audit = audit
        self._wire = Wire(base_url=base_url, api_key=api_key, clock=clock, transport=transport,
                          timeout_s=timeout_s, policy=RetryPolicy(max_attempts=max_attempts),
                          redactor=Redactor([api_key]), key_source=key_source)

    def __repr__(self) -> str:
        return f"HttpVastClient(base_url={redact_url_passwords(self._wire.base_url)!r}, api_key=<redacted>)"

    @property
    def base_url(self) -> str:
        return self._wire.base_url

    async def __aenter__(self) -> HttpVastClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._wire.aclose()

    # --- reads ----------------------------------------------------------------------------------------------------

    async def search_offers(self, query: str = "", *, order: str = "score-", type_: str = "on-demand",
                            limit: int | None = None, storage_gib: float = 5.0,
                            no_default: bool = False) -> OfferRows:
        """Search offers with the official CLI's query language (raises QueryError before any I/O)."""
        body = build_search_body(query, order=order, type_=type_, limit=limit, storage_gib=storage_gib,
                                 no_default=no_default)
        return await self.search_offers_body(body)

    async def search_offers_body(self, body: Mapping[str, object]) -> OfferRows:
        """``POST /api/v0/bundles/`` with a ready-made query body. A row that cannot be parsed is logged and
        skipped (``OfferRows.unreadable``): one odd offer never hides the others."""
        reply = await self._wire.call("POST", "/bundles/", body=body)
        rows = _field(reply, "offers", list, "POST /bundles/")
        offers = OfferRows()
        unreadable = []
        for i, row in enumerate(rows):
            where = f"row {i} of POST /bundles/"
            try:
                offers.append(self._parse(Offer.from_api, row, where))
            except ApiError as exc:
                skipped = UnreadableRow.of(row, where=where, reason=exc.message)
                self._wire.log(logging.WARNING, f"offer search: {skipped.describe('offer')}; skipped")
                unreadable.append(skipped)
        offers.unreadable = tuple(unreadable)
        return offers

    async def list_instances(self) -> InstanceListing:
        """Every instance, following every v1 page. A failed page gives ``is_complete=False`` with what was read;
        a rejected API key raises AuthError."""
        return await list_all_instances(self._wire)

    async def show_instance(self, instance_id: int) -> Instance | None:
        """``GET /api/v0/instances/{id}/?owner=me``; None when the marketplace says there is no such instance."""
        path = f"/instances/{instance_id}/"
        reply = await self._wire.call("GET", path, params={"owner": "me"})
        if not isinstance(reply, Mapping) or "instances" not in reply:
            raise ApiError(self._wire.redact(f"GET {path}: expected an object with 'instances'"))
        row = reply["instances"]
        if row is None:
            return None
        if not isinstance(row, Mapping):
            raise ApiError(f"GET {path}: 'instances' should be an object or null, got {type(row).__name__}")
        return self._parse(Instance.from_api, row, f"GET {path}")

    async def get_user(self) -> User:
        reply = await self._wire.call("GET", "/users/current")
        if not isinstance(reply, Mapping):
            raise ApiError("GET /users/current: expected a JSON object")
        return self._parse(User.from_api, reply, "GET /users/current")

    async def list_ssh_keys(self) -> list[SshKey]:
        """The account's live SSH keys. The API answers 404 when the account has none (docs/api-notes.md §3.13):
        that is an empty list, unless the 404 says the API key itself is bad. Deleted rows are left out."""
        try:
            reply = await self._wire.call("GET", "/ssh/")
        except NotFound as exc:
            if exc.code == "auth_error" or "invalid user key" in exc.server_message.lower():
                raise AuthError(str(exc), status=exc.status, code=exc.code, title="API key rejected") from exc
            return []
        rows = reply.get("keys", reply.get("ssh_keys")) if isinstance(reply, Mapping) else reply
        if not isinstance(rows, list):
            raise ApiError("GET /ssh/: expected a list of keys")
        keys = [self._parse(SshKey.from_api, row, f"row {i} of GET /ssh/") for i, row in enumerate(rows)]
        return [key for key in keys if not key.is_deleted]

    async def request_logs(self, instance_id: int, *, tail: int | None = None, daemon: bool = False) -> str:
        """Ask for an instance's logs and poll the result URL (no auth, only HTTP 200 counts, bounded).

        ``daemon`` asks for the container daemon's log (image pull, container errors) instead of the container's
        own output; both options are strings on the wire, as the official CLI sends them (docs/api-notes.md §3.11)."""
        path = f"/instances/request_logs/{instance_id}/"
        body: dict[str, object] = {}
        if tail is not None:
            body["tail"] = str(tail)
        if daemon:
            body["daemon_logs"] = "true"
        reply = await self._wire.call("PUT", path, body=body)
        url = _field(reply, "result_url", str, f"PUT {path}")
        for _ in range(LOG_POLLS):
            await self._clock.sleep(LOG_POLL_INTERVAL_S)
            status, text = await self._wire.fetch_result(url)
            if status == 200:
                return text
        raise ApiError(f"logs of instance {instance_id} were not ready after {LOG_POLLS} polls "
                       f"({LOG_POLLS * LOG_POLL_INTERVAL_S:.0f} s)", title="Logs not ready")

    # --- mutations (each needs an Approval) -----------------------------------------------------------------------

    async def create_instance(self, *, offer_id: int, image: str, disk_gib: float, label: str, approval: Approval,
                              onstart: str | None = None, env: Mapping[str, str] | None = None,
                              runtype: str = DEFAULT_RUNTYPE) -> CreatedInstance:
        """Rent ``offer_id``. ``label`` must be unique to this create: it is how a lost answer is reconciled."""
        if not label.strip():
            raise ApiError("create_instance needs a non-empty, unique label (it is how a lost answer is found)")
        if disk_gib <= 0:
            raise ApiError(f"disk must be positive, not {disk_gib} GiB")
        target = offer_target(offer_id)
        body: dict[str, object] = {
            "client_id": "me", "image": image, "env": dict(env or {}), "price": None, "disk": float(disk_gib),
            "label": label, "extra": None, "onstart": onstart, "image_login": None, "python_utf8": False,
            "lang_utf8": False, "use_jupyter_lab": False, "jupyter_dir": None, "force": False,
            "cancel_unavail": True, "template_hash_id": None, "user": None, "runtype": runtype,
        }

        async def rent() -> CreatedInstance:
            return await self._rent(offer_id, label, body)

        return await self._mutate(approval, Action.CREATE_INSTANCE, target, rent,
                                  lambda made: f"ok: instance {made.instance_id}"
                                  + (" (found by label after a lost answer)" if made.reconciled else ""))

    async def destroy_instance(self, instance_id: int, *, approval: Approval) -> Answered:
        """Destroy; returns when the request went out and its answer came (before the audit write), the window
        in which the marketplace stopped billing."""
        window: list[float] = []

        async def send() -> None:
            window.append(self._clock.now())
            try:
                await self._wire.call("DELETE", f"/instances/{instance_id}/", body={})
            except NotFound as exc:
                if not says_no_such_instance(exc, instance_id):
                    raise ApiError(self._wire.redact(
                        f"{exc.message} — a 404 that does not say instance {instance_id} is gone (an unknown "
                        f"endpoint or a proxy?); not counted as destroyed"), status=exc.status, code=exc.code,
                        title="Destroy not confirmed") from exc
                raise
            window.append(self._clock.now())

        await self._mutate(approval, Action.DESTROY_INSTANCE, instance_target(instance_id), send, lambda _: "ok")
        return Answered(sent_at=window[0], answered_at=window[-1])

    async def stop_instance(self, instance_id: int, *, approval: Approval) -> None:
        await self._simple(approval, Action.STOP_INSTANCE, instance_id, "PUT", f"/instances/{instance_id}/",
                           {"state": "stopped"})

    async def start_instance(self, instance_id: int, *, approval: Approval) -> None:
        await self._simple(approval, Action.START_INSTANCE, instance_id, "PUT", f"/instances/{instance_id}/",
                           {"state": "running"})

    async def label_instance(self, instance_id: int, label: str, *, approval: Approval) -> None:
        await self._simple(approval, Action.LABEL_INSTANCE, instance_id, "PUT", f"/instances/{instance_id}/",
                           {"label": label})

    async def prepay_instance(self, instance_id: int, amount_usd: float, *, approval: Approval) -> Prepaid:
        """Move credit onto an instance (a deposit that buys a discount). Money: never retried blindly."""
        _check_amount(amount_usd, approval)
        path = f"/instances/prepay/{instance_id}/"

        async def prepay() -> Prepaid:
            reply = await self._wire.call("PUT", path, body={"amount": float(amount_usd)}, retry=Retry.REFUSED_ONLY)
            return Prepaid(instance_id=instance_id, amount_usd=float(amount_usd),
                           timescale_months=_field(reply, "timescale", float, f"PUT {path}"),
                           discount_rate=_field(reply, "discount_rate", float, f"PUT {path}"))

        return await self._mutate(approval, Action.PREPAY_INSTANCE, instance_target(instance_id), prepay,
                                  lambda done: f"ok: ${done.amount_usd:.2f} for {done.timescale_months:.3g} months")

    async def transfer_credit(self, recipient: str, amount_usd: float, *, approval: Approval) -> None:
        """Send credit to another account (email or user id). Money: never retried blindly."""
        if not recipient.strip():
            raise ApiError("transfer_credit needs a recipient")
        _check_amount(amount_usd, approval)
        body = {"sender": "me", "recipient": recipient, "amount": float(amount_usd)}

        async def send() -> None:
            await self._wire.call("PUT", "/commands/transfer_credit/", body=body, retry=Retry.REFUSED_ONLY)

        await self._mutate(approval, Action.TRANSFER_CREDIT, recipient_target(recipient), send,
                           lambda _: f"ok: ${amount_usd:.2f} sent")

    async def create_ssh_key(self, public_key: str, *, approval: Approval) -> None:
        """Register a public key on the account (target: ``ssh_key_target(public_key)``)."""
        key = _public_key(public_key)

        async def create() -> None:
            await self._wire.call("POST", "/ssh/", body={"ssh_key": key}, retry=Retry.REFUSED_ONLY)

        await self._mutate(approval, Action.CREATE_SSH_KEY, ssh_key_target(key), create, lambda _: "ok")

    async def attach_ssh_key(self, instance_id: int, public_key: str, *, approval: Approval) -> None:
        """Authorise a public key on one instance."""
        key = _public_key(public_key)

        async def attach() -> None:
            await self._wire.call("POST", f"/instances/{instance_id}/ssh/", body={"ssh_key": key})

        await self._mutate(approval, Action.ATTACH_SSH_KEY, instance_target(instance_id), attach, lambda _: "ok")

    # --- internals ------------------------------------------------------------------------------------------------

    async def _simple(self, approval: Approval, action: Action, instance_id: int, method: str, path: str,
                      body: Mapping[str, object]) -> None:
        async def send() -> None:
            await self._wire.call(method, path, body=body)

        await self._mutate(approval, action, instance_target(instance_id), send, lambda _: "ok")

    async def _mutate(self, approval: Approval | None, action: Action, target: str,
                      operation: Callable[[], Awaitable[T]], describe: Callable[[T], str]) -> T:
        """Consume the approval (before any I/O), write that the call is going out, run it, and audit its outcome
        either way. The "sending" record comes first so that a console killed mid-call (SIGKILL, power) still
        leaves a trace of every request it sent next to the approval it spent."""
        granted = require(approval, action=action, target=target)
        # Destroy before paperwork: a destroy stops billing, so a trace that cannot be written anywhere (the store
        # and its fallback journal both refuse: a full disk) never holds it back — it is logged instead. Every
        # other call needs its trace first.
        must_trace = action is not Action.DESTROY_INSTANCE
        await self._record(granted, action, target, "sending", kind=AuditKind.SENDING, must_trace=must_trace)
        try:
            result = await operation()
        except VastuiError as exc:
            await self._record(granted, action, target, f"error: {exc.message}", must_trace=must_trace)
            raise
        await self._record(granted, action, target, describe(result), must_trace=must_trace)
        return result

    async def _record(self, approval: Approval, action: Action, target: str, outcome: str, *,
                      kind: AuditKind = AuditKind.CALL, must_trace: bool = True) -> None:
        if kind is AuditKind.CALL:
            self._wire.log(logging.INFO, f"{action} {target}: {outcome}")
        if self._audit is None:
            return
        try:
            await self._audit.record_audit(AuditRecord(
                at=self._clock.now(), kind=kind, action=action, target=target, approval_id=approval.approval_id,
                granted_by=approval.granted_by, outcome=self._wire.redact(outcome)[:500],
                campaign_id=approval.request.campaign_id,
            ))
        except VastuiError as exc:
            if must_trace:
                raise
            if kind is AuditKind.SENDING:   # one line per call: its outcome's record fails the same way
                self._wire.log(logging.ERROR, f"{action} {target} goes ahead without its audit record: "
                                              f"{exc.message}")

    async def _rent(self, offer_id: int, label: str, body: Mapping[str, object]) -> CreatedInstance:
        path = f"/asks/{offer_id}/"
        try:
            reply = await self._wire.call("PUT", path, body=body, retry=Retry.REFUSED_ONLY)
        except NotSent as exc:
            return await self._reconcile(offer_id, label, exc, may_be_pending=False)
        except (TransportError, GarbledReply) as exc:
            return await self._reconcile(offer_id, label, exc)
        except ApiError as exc:
            if (exc.status or 0) < 500:
                raise  # the marketplace answered and refused: nothing was rented
            return await self._reconcile(offer_id, label, exc)  # a 5xx may come after the work was done
        try:
            new_id = _field(reply, "new_contract", int, f"PUT {path}")
        except ApiError as exc:  # a success without an id: something may have been rented
            return await self._reconcile(offer_id, label, exc)
        return CreatedInstance(instance_id=new_id, offer_id=offer_id, label=label)

    async def _reconcile(self, offer_id: int, label: str, cause: ApiError, *,
                         may_be_pending: bool = True) -> CreatedInstance:
        """The create's answer was lost: look for its label before deciding anything (``reconcile.py``)."""
        return await reconcile_create(list_instances=self.list_instances, clock=self._clock, wire=self._wire,
                                      offer_id=offer_id, label=label, cause=cause, may_be_pending=may_be_pending)

    def _parse(self, parse: Callable[..., T], row: object, where: str) -> T:
        if not isinstance(row, Mapping):
            raise ApiError(f"{where}: expected a JSON object, got {type(row).__name__}")
        try:
            return parse(row, where=where)
        except ApiError as exc:
            raise ApiError(self._wire.redact(exc.message)) from exc


def _field(reply: object, name: str, kind: type[T], where: str) -> T:
    """``reply[name]`` if it is a ``kind`` (bools are not numbers), else ApiError naming what is wrong where."""
    if not isinstance(reply, Mapping):
        raise ApiError(f"{where}: expected a JSON object with {name!r}, got {type(reply).__name__}")
    value = reply.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and kind is float:
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ApiError(f"{where}: field {name!r} is missing or has the wrong type ({type(value).__name__})")
    return value


def _check_amount(amount_usd: float, approval: Approval | None) -> None:
    """A money call's amount against its approval's cost cap, before any I/O (a missing approval is ``require``'s
    to refuse). A money approval without a cap approves no amount at all (docs/architecture.md)."""
    if not amount_usd > 0:
        raise ApiError(f"the amount must be a positive number of USD, not {amount_usd}")
    if approval is None:
        return
    cap = approval.request.cost_cap_usd
    if cap is None:
        raise ApprovalRequired(f"approval {approval.approval_id} for {approval.request.action} carries no cost cap; "
                               f"a money approval must say the most it allows", title="No cost cap")
    if amount_usd > cap:
        raise ApprovalRequired(f"${amount_usd:.2f} is over the approved cap of ${cap:.2f}", title="Over the cap")


def _public_key(public_key: str) -> str:
    key = public_key.strip()
    if "PRIVATE KEY" in key:
        raise ApiError("that is a private key; pass the public key (the .pub file's text)")
    if not key.startswith(("ssh-", "ecdsa-", "sk-")):
        raise ApiError("not an SSH public key (it should start with ssh-, ecdsa- or sk-)")
    return key
