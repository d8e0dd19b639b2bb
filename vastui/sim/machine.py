"""A simulated machine: the public fields its offer shows (docs/api-notes.md §5) and the hidden truth behind them.

Fields that depend on the moment or on the query (``duration``, ``dph_total`` at the requested storage, the
``rented`` state the market tracks) are computed when an offer row is rendered (``sim/offers.py``); everything
here is fixed for the life of the world.
"""

from __future__ import annotations

from dataclasses import dataclass

from vastui.sim.truth import MachineTruth


@dataclass(frozen=True, slots=True)
class Machine:
    """One listed machine with one whole-machine offer. Units follow the Vast API (MB, GB, Mb/s, $/hr)."""

    # identity
    offer_id: int
    machine_id: int
    host_id: int
    # GPUs
    num_gpus: int
    gpu_name: str
    gpu_ram_mb: int
    gpu_arch: str
    gpu_lanes: int
    gpu_mem_bw: float
    gpu_max_power: float
    gpu_max_temp: float
    gpu_display_active: bool
    compute_cap: int
    cuda_max_good: float
    driver_version: str
    driver_vers: int
    bw_nvlink: float
    total_flops: float
    dlperf: float
    # CPU, memory, disk, board
    cpu_name: str
    cpu_arch: str
    cpu_cores: int
    cpu_cores_effective: float
    cpu_ghz: float
    cpu_ram_mb: int
    disk_space_gb: float
    disk_bw: float
    disk_name: str
    mobo_name: str
    os_version: str
    has_avx: int
    pci_gen: float
    pcie_bw: float
    # network
    inet_up: float
    inet_down: float
    inet_up_cost: float
    inet_down_cost: float
    direct_port_count: int
    static_ip: bool
    public_ipaddr: str
    hostname: str
    # prices ($/hr for the whole offer unless noted)
    dph_base: float
    min_bid: float
    storage_cost: float            # $/GB/month
    credit_discount_max: float     # reserved (prepaid) discount
    platform_fee: float
    # trust and place
    reliability: float
    expected_reliability: float
    verification: str              # verified / unverified / deverified
    external: bool
    hosting_type: int              # 1 = datacenter
    geolocation: str               # "City, CC"
    geolocode: int
    vms_enabled: bool
    cluster_id: int | None
    # listing window (epoch seconds)
    start_date: float
    end_date: float
    # initial market state
    rentable: bool
    rented: bool
    # hidden
    truth: MachineTruth

    @property
    def country_code(self) -> str:
        return self.geolocation[-2:]

    @property
    def is_verified(self) -> bool:
        return self.verification == "verified"

    @property
    def is_datacenter(self) -> bool:
        return self.hosting_type == 1


@dataclass(frozen=True, slots=True)
class World:
    """Every machine of a seeded market, in listing order."""

    seed: int
    generated_at: float
    machines: list[Machine]

    def machine(self, machine_id: int) -> Machine:
        """The machine with this id; KeyError if none."""
        for machine in self.machines:
            if machine.machine_id == machine_id:
                return machine
        raise KeyError(machine_id)

    def by_offer(self, offer_id: int) -> Machine | None:
        """The machine behind an offer id, or None."""
        for machine in self.machines:
            if machine.offer_id == offer_id:
                return machine
        return None
