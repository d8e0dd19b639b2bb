"""SSH as Vast.ai does it (docs/api-notes.md §3.12): a proxy endpoint in ``ssh_host``/``ssh_port``, direct access
only when asked for on a machine with open ports, the account's keys arriving late in an ``authorized_keys`` the
platform rewrites, and sshd accepting a little after ``running`` — survived by the client, which tries an
instance's endpoints in order and retries refusals until its readiness deadline.

Source of every rule: docs/api-notes.md §3.12, which cites vast-ai/docs and public threads ("ssh_host/ssh_port are
a proxy (sshN.vast.ai); direct access needs ports["22/tcp"] and a direct runtype; keys reach a new instance late and
Vast rewrites authorized_keys; sshd can come up after running"), the official CLI's runtype flags (§3.4) and its
ssh-url (§3.12).

The simulator and the runner share a FakeClock that moves only when the runner sleeps between tries, so every
"late" is decided by the simulated clock, never by how busy this machine is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from tests.fakes import FakeClock
from tests.remote.remote_support import SIM_API_KEY, SIM_SCALE, ClientKey, grant, put_bytes, reach_ssh, rent_running
from vastui.approval import Action, instance_target, offer_target
from vastui.clock import ScaledClock
from vastui.config import Secret
from vastui.errors import HostKeyMismatch, RemoteError, RemoteTimeout
from vastui.remote.runner import SshRunner
from vastui.sim.factory import build_market
from vastui.sim.hosts import SshHostPool
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.sim.sshpaths import KEYS_LATE_S
from vastui.sim.truth import Fault
from vastui.vast.client import DEFAULT_RUNTYPE, HttpVastClient, ssh_key_target
from vastui.vast.models import Instance

SEED = 7
PROXY_ONLY = "ssh_proxy"   # what `vastai create instance --ssh` sends (the official CLI; docs/api-notes.md §3.4)


@dataclasses.dataclass
class Rig:
    clock: FakeClock
    market: Market
    pool: SshHostPool
    client: HttpVastClient
    tmp: Path

    def runner(self, key: Path, *, known_hosts: str = "known_hosts") -> SshRunner:
        return SshRunner(known_hosts=self.tmp / known_hosts, client_keys=[key], use_agent=False, clock=self.clock,
                         retry_interval_s=1.0, connect_timeout_s=10.0)

    async def register(self, public_key: str) -> None:
        await self.client.create_ssh_key(public_key,
                                         approval=grant(Action.CREATE_SSH_KEY, ssh_key_target(public_key)))

    async def rent(self, *, runtype: str = DEFAULT_RUNTYPE, open_ports: bool = True) -> Instance:
        """Rent a healthy machine (with or without open ports) and advance the clock until its row says running."""
        taken = self.market.rented_machine_ids()
        machine = next(m for m in self.market.world.machines
                       if m.machine_id not in taken and m.truth.fault is Fault.NONE and m.num_gpus == 1
                       and (m.direct_port_count > 0) == open_ports)
        created = await self.client.create_instance(
            offer_id=machine.offer_id, image="ubuntu:22.04", disk_gib=10, label=f"ssh-paths-{machine.offer_id}",
            approval=grant(Action.CREATE_INSTANCE, offer_target(machine.offer_id)), runtype=runtype)
        for _ in range(200):
            instance = await self.client.show_instance(created.instance_id)
            if instance is not None and instance.is_running and instance.ssh_endpoints():
                return instance
            self.clock.advance(30.0)
        raise AssertionError(f"instance {created.instance_id} never reached running")


def make_key(tmp: Path, name: str) -> ClientKey:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp / name
    path.write_bytes(key.export_private_key())
    path.chmod(0o600)
    return ClientKey(path=path, public=key.export_public_key().decode().strip())


@pytest.fixture
def realism(request: pytest.FixtureRequest) -> Realism:
    return getattr(request, "param", Realism.vast())


@pytest.fixture
async def rig(tmp_path: Path, realism: Realism) -> AsyncIterator[Rig]:
    clock = FakeClock()
    pool = SshHostPool(base_dir=tmp_path / "hosts", clock=clock, realism=realism, seed=SEED)
    market = build_market(SEED, clock=clock, api_key=SIM_API_KEY, host_provider=pool, realism=realism)
    try:
        async with SimServer(market, poll=False) as server:
            async with HttpVastClient(base_url=server.url, api_key=Secret(SIM_API_KEY), clock=clock) as client:
                yield Rig(clock, market, pool, client, tmp_path)
    finally:
        await market.aclose()
        await pool.close()


async def test_a_proxy_only_instance_is_reached_through_its_proxy(rig: Rig, client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12 and §3.4 (vast-ai/docs; the official CLI's flags): `--ssh` alone asks for "ssh_proxy";
    # the row then maps no 22/tcp, and ssh_host/ssh_port (the proxy) is the only way in.
    await rig.register(client_key.public)
    instance = await rig.rent(runtype=PROXY_ONLY)
    assert instance.direct_ssh_port is None
    assert instance.ssh_host is not None and instance.ssh_port is not None
    assert instance.ssh_endpoints() == [(instance.ssh_host, instance.ssh_port)]
    runner = rig.runner(client_key.path)
    async with runner.connect_first(instance.ssh_endpoints(), deadline_s=300) as conn:
        result = await conn.run_command(["echo", "through the proxy"])
    assert conn.endpoint == (instance.ssh_host, instance.ssh_port)
    assert result.exit_status == 0 and result.stdout == "through the proxy\n"


async def test_a_machine_without_open_ports_offers_only_its_proxy(rig: Rig, client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12 (vast-ai/docs and public threads): direct access needs a direct runtype *and* ports the
    # machine opened; a seeded share of the simulated machines list direct_port_count 0, and their instances are
    # reached through the proxy alone.
    await rig.register(client_key.public)
    instance = await rig.rent(runtype=DEFAULT_RUNTYPE, open_ports=False)
    assert instance.direct_ssh_port is None
    assert instance.ssh_endpoints() == [(instance.ssh_host, instance.ssh_port)]
    await reach_ssh(rig.runner(client_key.path), instance.ssh_endpoints(), deadline_s=300)


async def test_direct_is_preferred_and_the_proxy_used_when_direct_refuses(rig: Rig, client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12 (the official CLI's ssh-url): direct (public_ipaddr + ports["22/tcp"]) when the row has
    # it, else the proxy; vast-ai/docs: the proxy is always there. A closed direct port must not strand the instance:
    # the proxy is the next endpoint.
    await rig.register(client_key.public)
    instance = await rig.rent(runtype=DEFAULT_RUNTYPE)
    endpoints = instance.ssh_endpoints()
    assert instance.public_ipaddr is not None and instance.direct_ssh_port is not None
    direct, proxy = (instance.public_ipaddr, instance.direct_ssh_port), (instance.ssh_host, instance.ssh_port)
    assert endpoints == [direct, proxy] and direct != proxy
    first = rig.runner(client_key.path)
    assert await reach_ssh(first, endpoints, deadline_s=300) == direct

    rig.pool.refuse_direct(instance_id=instance.id)
    second = rig.runner(client_key.path)
    async with second.connect_first(endpoints, deadline_s=300) as conn:
        assert conn.endpoint == proxy
        assert (await conn.run_command(["true"])).exit_status == 0
    # one instance, one sshd, one host key: the proxy's was checked against the key recorded on the direct path
    assert second.known_hosts.lookup(*proxy) == second.known_hosts.lookup(*direct) != []


async def test_a_proxy_that_shows_another_key_than_the_direct_path_is_refused(rig: Rig,
                                                                              client_key: ClientKey) -> None:
    # known_hosts.py: an instance's endpoints share its host key, so a first contact on one endpoint trusts the key
    # recorded on the other; another key there is a changed key (refused), not a new host (recorded).
    await rig.register(client_key.public)
    one = await rig.rent(runtype=DEFAULT_RUNTYPE)
    other = await rig.rent(runtype=PROXY_ONLY)
    runner = rig.runner(client_key.path)
    direct = one.ssh_endpoints()[0]
    await reach_ssh(runner, [direct], deadline_s=300)
    proxy_of_other = other.ssh_endpoints()[0]
    await reach_ssh(rig.runner(client_key.path, known_hosts="kh-other"), [proxy_of_other], deadline_s=300)
    with pytest.raises(HostKeyMismatch, match="differs from the one recorded"):
        await runner.open_connection(*proxy_of_other, siblings=[direct])
    assert runner.known_hosts.lookup(*proxy_of_other) == []


@pytest.mark.parametrize("realism", [Realism(ssh_keys_late=True)], indirect=True)
async def test_a_key_that_reaches_the_host_late_is_retried_until_accepted(rig: Rig, client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12 (vast-ai/docs and public threads): "Keys reach a new instance late": the first login
    # after running is refused, and the client keeps trying until the readiness deadline instead of failing the
    # instance.
    await rig.register(client_key.public)
    instance = await rig.rent()
    (host, port), = instance.ssh_endpoints()
    runner = rig.runner(client_key.path)
    with pytest.raises(RemoteError, match="refused our SSH key"):
        await runner.open_connection(host, port)
    started = rig.clock.now()
    await reach_ssh(runner, instance.ssh_endpoints(), deadline_s=KEYS_LATE_S[1] + 30)
    assert rig.clock.now() > started   # it was refused at first and retried on the clock
    keys = (rig.pool.root_dir(instance_id=instance.id) / ".ssh" / "authorized_keys").read_text(encoding="utf-8")
    assert client_key.public.split()[1] in keys


@pytest.mark.parametrize("realism", [Realism(ssh_keys_late=True)], indirect=True)
async def test_a_key_never_registered_fails_at_the_deadline_with_the_reason(rig: Rig, client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12 and §3.13 (vast-ai/docs): only the account's (or attached) keys are written to
    # authorized_keys; a key that was never registered is refused every time, and the deadline's error says so.
    await rig.register(client_key.public)
    stranger = make_key(rig.tmp, "stranger")
    instance = await rig.rent()
    runner = rig.runner(stranger.path)
    started = rig.clock.now()
    with pytest.raises(RemoteTimeout, match=r"did not accept SSH within 90 s: .*refused our SSH key .*registered"):
        await reach_ssh(runner, instance.ssh_endpoints(), deadline_s=90)
    assert rig.clock.now() - started >= 89   # retried until the deadline, not failed at once


@pytest.mark.parametrize("realism", [Realism(sshd_late=True)], indirect=True)
async def test_sshd_that_comes_up_after_running_is_waited_for(rig: Rig, client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12 (vast-ai/docs and public threads): "sshd can come up after running": the port takes the
    # connection and closes it before the banner; the client retries until sshd answers.
    await rig.register(client_key.public)
    instance = await rig.rent()
    (host, port), = instance.ssh_endpoints()
    runner = rig.runner(client_key.path)
    with pytest.raises(RemoteError) as refused:
        await runner.open_connection(host, port)
    assert "refused our SSH key" not in str(refused.value)
    started = rig.clock.now()
    await reach_ssh(runner, instance.ssh_endpoints(), deadline_s=120)
    assert rig.clock.now() > started


@pytest.mark.parametrize("realism", [Realism(ssh_keys_late=True)], indirect=True)
async def test_attaching_a_key_rewrites_authorized_keys(rig: Rig, client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12 (vast-ai/docs and public threads): "Vast rewrites authorized_keys": a key attached later
    # reaches the host, and a line put into the file by hand is gone after the rewrite (the file is replaced, not
    # appended to).
    await rig.register(client_key.public)
    instance = await rig.rent()
    await reach_ssh(rig.runner(client_key.path), instance.ssh_endpoints(), deadline_s=KEYS_LATE_S[1] + 30)
    keys_file = rig.pool.root_dir(instance_id=instance.id) / ".ssh" / "authorized_keys"
    by_hand = make_key(rig.tmp, "by-hand")
    keys_file.write_text(keys_file.read_text(encoding="utf-8") + by_hand.public + "\n", encoding="utf-8")
    await reach_ssh(rig.runner(by_hand.path, known_hosts="kh-hand"), instance.ssh_endpoints(), deadline_s=5)

    attached = make_key(rig.tmp, "attached")
    await rig.client.attach_ssh_key(instance.id, attached.public,
                                    approval=grant(Action.ATTACH_SSH_KEY, instance_target(instance.id)))
    text = keys_file.read_text(encoding="utf-8")
    assert attached.public.split()[1] in text and by_hand.public.split()[1] not in text
    await reach_ssh(rig.runner(attached.path, known_hosts="kh-att"), instance.ssh_endpoints(), deadline_s=5)
    with pytest.raises(RemoteTimeout, match="refused our SSH key"):
        await reach_ssh(rig.runner(by_hand.path, known_hosts="kh-hand"), instance.ssh_endpoints(), deadline_s=5)


@pytest.mark.slow
async def test_ssh_run_falls_back_to_the_proxy_when_the_direct_port_refuses(client_key: ClientKey,
                                                                            tmp_path: Path) -> None:
    # docs/api-notes.md §3.12: `vastai ssh-url` would hand out the direct port alone; `vastui ssh-run` tries the
    # instance's proxy next, in a real process against the simulated marketplace.
    clock = ScaledClock(scale=SIM_SCALE)
    realism = Realism(ssh_proxy=True)
    pool = SshHostPool(base_dir=tmp_path / "hosts", clock=clock, realism=realism, seed=SEED)
    market = build_market(SEED, clock=clock, api_key=SIM_API_KEY, host_provider=pool, realism=realism)
    try:
        async with SimServer(market) as server:
            async with HttpVastClient(base_url=server.url, api_key=Secret(SIM_API_KEY), clock=clock) as client:
                instance_id, _, (host, port) = await rent_running(client, market, client_key.public,
                                                                  label="ssh-run-proxy")
                instance = await client.show_instance(instance_id)
            assert instance is not None and len(instance.ssh_endpoints()) == 2
            assert (host, port) == instance.ssh_endpoints()[0] == (instance.public_ipaddr, instance.direct_ssh_port)
            pool.refuse_direct(instance_id=instance_id)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "vastui", "ssh-run", "--url", server.url, "--api-key", SIM_API_KEY,
                "--ssh-key", str(client_key.path), str(instance_id), "--", "echo", "via the proxy",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
            out, err = await asyncio.wait_for(proc.communicate(), 120)
            assert proc.returncode == 0, err.decode()
            assert out.decode() == "via the proxy\n"
    finally:
        await market.aclose()
        await pool.close()


async def test_a_held_direct_connection_that_drops_comes_back_through_the_proxy(rig: Rig,
                                                                               client_key: ClientKey) -> None:
    # docs/api-notes.md §3.12: the proxy stays when the direct port goes; a held instance's calls carry on over it.
    await rig.register(client_key.public)
    instance = await rig.rent(runtype=DEFAULT_RUNTYPE)
    direct, proxy = instance.ssh_endpoints()
    runner = rig.runner(client_key.path)
    async with runner.connect_first([direct, proxy], deadline_s=300) as conn:
        assert conn.endpoint == direct
        rig.pool.refuse_direct(instance_id=instance.id)
        assert rig.pool.drop_connections(instance_id=instance.id) == 1
        # an upload reconnects after a drop (a one-shot command would report the drop, the next one reconnect)
        await put_bytes(conn, b"x", remote_path="after-the-drop")
        result = await conn.run_command(["echo", "still here"])
        assert result.stdout == "still here\n"
    assert (rig.pool.root_dir(instance_id=instance.id) / "after-the-drop").read_bytes() == b"x"
    assert runner.connections_opened == 2
