"""The renter's account in the simulator: credit, transfers, account SSH keys, and how a charge is paid."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from vastui.sim.market_error import MarketError

USER_ID = 424242
USERNAME = "sim-operator"


@dataclass(frozen=True, slots=True)
class Transfer:
    recipient: str
    amount_usd: float
    at: float


@dataclass(frozen=True, slots=True)
class SshKey:
    id: int
    public_key: str
    created_at: float

    def as_json(self) -> dict[str, Any]:
        """A row of ``GET /api/v0/ssh/`` as documented (``key``, a date-time ``created_at``), with ``public_key``
        too, the name the OpenAPI description and the official CLI's users read (docs/api-notes.md §3.13)."""
        created = dt.datetime.fromtimestamp(self.created_at, tz=dt.UTC).isoformat()
        return {"id": self.id, "user_id": USER_ID, "key": self.public_key, "public_key": self.public_key,
                "created_at": created, "deleted_at": None}


@dataclass(slots=True)
class Account:
    """Mutable account state; the market is its only writer."""

    credit_usd: float
    transfers: list[Transfer] = field(default_factory=list)
    ssh_keys: dict[int, SshKey] = field(default_factory=dict)
    _next_key_id: int = 7_001

    def user_json(self) -> dict[str, Any]:
        """``GET /api/v0/users/current`` (without ``api_key``, as the CLI would strip it anyway)."""
        first_key = next(iter(self.ssh_keys.values()), None)
        return {
            "id": USER_ID, "username": USERNAME, "user": USERNAME, "fullname": "Simulated Operator",
            "email": "operator@sim.invalid", "email_verified": True, "credit": round(self.credit_usd, 6),
            "balance": 0.0, "balance_threshold": 0.0, "balance_threshold_enabled": False,
            "billaddress_city": None, "billaddress_country": None, "billaddress_line1": None,
            "billaddress_line2": None, "billaddress_zip": None, "billed_expected": 0.0, "billed_verified": 0.0,
            "billing_creditonly": True, "can_pay": True, "got_signup_credit": True, "has_billing": True,
            "has_payout": False, "last4": None, "paid_expected": 0.0, "paid_verified": 0.0,
            "password_resettable": True, "paypal_email": None,
            "ssh_key": first_key.public_key if first_key else "", "host_agreement_accepted": False,
        }

    def transfer(self, *, recipient: str, amount_usd: float, at: float) -> str | None:
        """Send credit; None on success, else the reason it was refused."""
        if not recipient.strip():
            return "A recipient (email or user id) is required."
        if amount_usd <= 0:
            return "The amount must be positive."
        if amount_usd > self.credit_usd:
            return f"Insufficient credit: ${self.credit_usd:.2f} available, ${amount_usd:.2f} requested."
        self.credit_usd -= amount_usd
        self.transfers.append(Transfer(recipient=recipient, amount_usd=amount_usd, at=at))
        return None

    def allocate_key_id(self) -> int:
        """A fresh key id (account keys and keys attached to instances share one sequence)."""
        self._next_key_id += 1
        return self._next_key_id - 1

    def add_key(self, public_key: str, *, at: float) -> SshKey:
        key = SshKey(id=self.allocate_key_id(), public_key=_validated(public_key), created_at=at)
        self.ssh_keys[key.id] = key
        return key

    def update_key(self, key_id: int, public_key: str) -> SshKey:
        old = self._key(key_id)
        key = SshKey(id=key_id, public_key=_validated(public_key), created_at=old.created_at)
        self.ssh_keys[key_id] = key
        return key

    def delete_key(self, key_id: int) -> None:
        self._key(key_id)
        del self.ssh_keys[key_id]

    def _key(self, key_id: int) -> SshKey:
        if key_id not in self.ssh_keys:
            raise MarketError(404, "no_such_key", f"SSH key {key_id} not found.")
        return self.ssh_keys[key_id]


def _validated(public_key: str) -> str:
    text = public_key.strip()
    if not text:
        raise MarketError(400, "invalid_args", "ssh_key must not be empty.")
    if "PRIVATE KEY" in text:
        raise MarketError(400, "invalid_args", "That is a private key; send the public key.")
    return text


def validated_public_key(public_key: str) -> str:
    """A key fit for authorized_keys (starts with ``ssh``), as the attach endpoint requires."""
    text = _validated(public_key)
    if not text.startswith(("ssh-", "ecdsa-", "sk-")):
        raise MarketError(400, "invalid_args", "Not an SSH public key (it must start with 'ssh-' or 'ecdsa-').")
    return text
