"""Typed models parse what the marketplace sends, refuse garbage by naming the field and the row, and keep no
secrets."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from vastui.errors import ApiError
from vastui.vast.models import Instance, InstanceStatus, Offer, SshKey, User

OFFER: dict[str, Any] = {
    "id": 5, "machine_id": 10, "host_id": 3, "num_gpus": 2, "gpu_name": "RTX 4090", "gpu_ram": 24564,
    "dph_total": 0.61, "dlperf": 182.6, "dlperf_per_dphtotal": 299.3, "reliability": 0.981, "rentable": True,
    "rented": False, "external": 0, "verification": "verified", "geolocation": "Oslo, NO", "hosting_type": 1,
    "compute_cap": 890.0, "some_future_field": {"nested": True},
}
INSTANCE: dict[str, Any] = {
    "id": 30000001, "machine_id": 10, "actual_status": "running", "intended_status": "running", "label": "job-1",
    "num_gpus": 2, "gpu_name": "RTX 4090", "dph_total": 0.61, "start_date": 1_800_000_000, "ssh_host": "ssh4.vast.ai",
    "ssh_port": 12345, "public_ipaddr": "203.0.113.5", "image_runtype": "ssh_direc ssh_proxy",
    "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40022"}]},
    "jupyter_token": "jt-secret-0001", "instance_api_key": "ik-secret-0002",
    "extra_env": [["HF_TOKEN", "hf-secret-0003"]],
}


def test_offer_parses_with_units_and_helpers() -> None:
    offer = Offer.from_api(OFFER)
    assert (offer.id, offer.num_gpus, offer.gpu_ram, offer.compute_cap) == (5, 2, 24564.0, 890)
    assert offer.is_verified and offer.is_datacenter and offer.geolocation == "Oslo, NO"
    assert offer.external is False and offer.min_bid is None


def test_instance_parses_and_keeps_no_secret() -> None:
    instance = Instance.from_api(INSTANCE)
    assert instance.actual_status is InstanceStatus.RUNNING and instance.is_running
    assert instance.direct_ssh_port == 40022
    assert instance.ssh_endpoint() == ("203.0.113.5", 40022)
    text = repr(instance)
    for secret in ("jt-secret", "ik-secret", "hf-secret"):
        assert secret not in text


def test_proxy_endpoint_and_provisioning() -> None:
    row = {**INSTANCE, "ports": {}, "actual_status": None, "image_runtype": "jupyter_proxy ssh_proxy"}
    instance = Instance.from_api(row)
    assert instance.actual_status is None and not instance.is_running
    assert instance.ssh_endpoint() == ("ssh4.vast.ai", 12346)  # jupyter images use the next proxy port


def test_an_unheard_of_status_is_unknown_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    instance = Instance.from_api({**INSTANCE, "actual_status": "hibernating"})
    assert instance.actual_status is InstanceStatus.UNKNOWN
    assert "hibernating" in caplog.text


@pytest.mark.parametrize(
    ("model", "row", "words"),
    [
        (Offer, {**OFFER, "num_gpus": "2"}, "'num_gpus' should be an integer"),
        (Offer, {**OFFER, "num_gpus": True}, "'num_gpus' should be an integer"),
        (Offer, {**OFFER, "dph_total": None}, "required field 'dph_total'"),
        (Offer, {k: v for k, v in OFFER.items() if k != "gpu_name"}, "required field 'gpu_name'"),
        (Offer, {**OFFER, "reliability": "high"}, "'reliability' should be a number"),
        (Offer, {**OFFER, "rentable": "yes"}, "'rentable' should be true/false"),
        (Offer, {**OFFER, "compute_cap": 8.9}, "'compute_cap' should be an integer"),
        (Instance, {**INSTANCE, "actual_status": 3}, "'actual_status' should be a string"),
        (Instance, {**INSTANCE, "ports": {"22/tcp": [{"HostPort": "x"}]}}, "'ports'"),
        (Instance, {**INSTANCE, "start_date": "yesterday"}, "'start_date' should be a number"),
        (User, {"id": "me"}, "'id' should be an integer"),
        (SshKey, {"id": 1}, "required field 'key'"),
    ],
)
def test_garbage_is_refused_naming_field_and_row(model: Any, row: dict[str, Any], words: str) -> None:
    with pytest.raises(ApiError) as caught:
        model.from_api(row, where="row 3 of page 2")
    assert words in caught.value.message
    assert "row 3 of page 2" in caught.value.message


def test_a_row_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ApiError, match="expected a JSON object"):
        Offer.from_api([1, 2], where="row 0")  # type: ignore[arg-type]


def test_user_never_keeps_the_api_key() -> None:
    user = User.from_api({"id": 1, "username": "me", "credit": 12, "api_key": "sk-account-key-99"})
    assert user.credit == 12.0
    assert "sk-account-key-99" not in repr(user)
    assert not hasattr(user, "api_key")
