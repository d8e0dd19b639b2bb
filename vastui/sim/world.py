"""A seeded world of machines drawn from the real market's shape (docs/simulator.md): same seed, same market.

Hosts own one to three machines and share a place, a network and a trust level; each machine gets its GPU
model and count, CPU, RAM, disk, PCIe, prices, DLPerf and its hidden truth (``sim/luck.py``).
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass

from vastui.sim.gpus import GPU_MODELS, GpuModel
from vastui.sim.luck import PublicSpecs, draw_truth
from vastui.sim.machine import Machine, World
from vastui.sim.places import PLACES

__all__ = ["Machine", "World", "generate_world"]

OFFER_ID_BASE = 20_000_000
MACHINE_ID_BASE = 10_000
HOST_ID_BASE = 100_000
DAY_S = 86_400.0

_DRIVERS: tuple[tuple[str, float], ...] = (
    ("535.183.01", 12.2), ("550.54.14", 12.4), ("550.127.05", 12.4), ("560.35.03", 12.6),
    ("570.124.06", 12.8), ("575.57.08", 12.9),
)
_CONSUMER_CPUS = ("AMD Ryzen 9 5950X 16-Core Processor", "AMD Ryzen 9 7950X 16-Core Processor",
                  "13th Gen Intel(R) Core(TM) i9-13900K", "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz",
                  "AMD Ryzen Threadripper PRO 5975WX 32-Cores", "AMD EPYC 7302 16-Core Processor")
_DATACENTER_CPUS = ("AMD EPYC 7763 64-Core Processor", "AMD EPYC 9554 64-Core Processor",
                    "Intel(R) Xeon(R) Platinum 8480+", "AMD EPYC 7J13 64-Core Processor",
                    "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz")
_CONSUMER_BOARDS = ("ROG STRIX X570-E GAMING", "PRIME X670-P", "Z790 AORUS ELITE AX", "X99 Pro", "WRX80 Creator")
_DATACENTER_BOARDS = ("H12DSG-O-CPU", "SYS-420GP-TNR", "G493-ZB3-AAP1-000", "PowerEdge XE8545", "ESC8000A-E11")
_DISKS = ("Samsung SSD 990 PRO 2TB", "WD_BLACK SN850X 4000GB", "KIOXIA KCD8XPUG7T68", "Micron_7450_MTFDKCC3T8TFR",
          "Samsung SSD 870 EVO 2TB", "INTEL SSDPE2KE076T8")


@dataclass(frozen=True, slots=True)
class _Host:
    host_id: int
    place: str
    geolocode: int
    datacenter: bool
    verification: str
    reliability: float
    inet_down: float
    inet_up: float
    inet_down_cost: float
    inet_up_cost: float
    ip_address: str
    external: bool


def generate_world(seed: int, *, n_machines: int = 360, now: float) -> World:
    """Draw ``n_machines`` machines (one whole-machine offer each); deterministic for a seed and ``now``."""
    rng = random.Random(seed)
    weights = [model.supply_gpus**0.5 + 8.0 for model in GPU_MODELS]  # flattened so rare models still appear
    machines: list[Machine] = []
    host_index = 0
    while len(machines) < n_machines:
        model = rng.choices(GPU_MODELS, weights=weights)[0]
        host = _draw_host(rng, index=host_index, model=model)
        host_index += 1
        for _ in range(rng.choices((1, 2, 3), weights=(70, 20, 10))[0]):
            if len(machines) >= n_machines:
                break
            if machines and machines[-1].host_id == host.host_id and rng.random() < 0.3:
                model = rng.choices(GPU_MODELS, weights=weights)[0]
            machines.append(_draw_machine(rng, index=len(machines), host=host, model=model, now=now))
    return World(seed=seed, generated_at=now, machines=machines)


def _draw_host(rng: random.Random, *, index: int, model: GpuModel) -> _Host:
    place = rng.choices([p for p, _ in PLACES], weights=[w for _, w in PLACES])[0]
    datacenter = rng.random() < (0.8 if model.is_datacenter else 0.15)
    verified = rng.random() < model.verified_share
    verification = "verified" if verified else rng.choices(("unverified", "deverified"), weights=(60, 40))[0]
    if rng.random() < 0.02:
        reliability = 0.6  # brand-new machine without history
    elif rng.random() < 0.85:
        reliability = rng.uniform(0.975, 0.9995)
    else:
        reliability = rng.uniform(0.88, 0.975)
    if datacenter or rng.random() < 0.2:
        inet_down = rng.uniform(2000, 10000)
        inet_up = inet_down * rng.uniform(0.5, 1.0)
    else:
        inet_down = _interp(rng.random(), ((0, 100), (.1, 300), (.3, 700), (.7, 940), (1, 1000)))
        inet_up = inet_down * rng.uniform(0.15, 1.0)
    down_cost, up_cost = _bandwidth_prices(rng)
    return _Host(
        host_id=HOST_ID_BASE + index * 7 + rng.randrange(7),
        place=place, geolocode=_geocode(place),
        datacenter=datacenter, verification=verification, reliability=round(reliability, 4),
        inet_down=round(inet_down, 1), inet_up=round(inet_up, 1),
        inet_down_cost=down_cost, inet_up_cost=up_cost,
        ip_address=f"{rng.choice(('203.0.113', '198.51.100', '192.0.2'))}.{rng.randrange(1, 250)}",
        external=rng.random() < 0.08,
    )


def _geocode(place: str) -> int:
    # Stable across processes (str hash is salted per process).
    return sum((i + 1) * ord(c) for i, c in enumerate(place)) % 100_000


def _bandwidth_prices(rng: random.Random) -> tuple[float, float]:
    if rng.random() < 0.12:
        return 0.0, 0.0
    down_per_tb = _interp(rng.random(), ((0, 0.5), (.5, 2.7), (.75, 13.3), (.9, 25), (1, 40)))
    up_per_tb = down_per_tb * rng.uniform(1.0, 1.6)
    return round(down_per_tb / 1000, 5), round(min(40.0, up_per_tb) / 1000, 5)


def _interp(u: float, points: tuple[tuple[float, float], ...]) -> float:
    """Piecewise-linear inverse CDF through (quantile, value) points."""
    xs = [p for p, _ in points]
    i = max(1, min(len(points) - 1, bisect.bisect_right(xs, u)))
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (u - x0) / (x1 - x0 if x1 > x0 else 1.0)


def _num_gpus(rng: random.Random, model: GpuModel) -> int:
    if model.nvlink_gb_per_s > 0:
        return rng.choices((1, 2, 4, 8), weights=(25, 15, 20, 40))[0]
    return rng.choices((1, 2, 3, 4, 6, 8), weights=(38, 27, 2, 20, 3, 10))[0]


def _pcie(rng: random.Random, model: GpuModel, *, datacenter: bool) -> tuple[float, int, float]:
    gen = model.pcie_gen
    if not datacenter and rng.random() < 0.2:
        gen = 3
    lanes = model.pcie_lanes
    roll = rng.random()
    if lanes == 16 and roll < (0.05 if datacenter else 0.15):
        lanes = 8
    elif lanes == 16 and not datacenter and roll < 0.19:
        lanes = 4
    per_lane = {3: 0.75, 4: 1.5, 5: 3.3}[gen]
    bw = per_lane * lanes * rng.uniform(0.92, 1.05)
    if lanes == 4 and rng.random() < 0.25:
        bw = rng.uniform(0.19, 0.8)  # mining-rig riser
    return float(gen), lanes, round(bw, 2)


def _gpu_price(rng: random.Random, model: GpuModel, *, verified: bool, num_gpus: int) -> float:
    u = rng.random()
    u = u**0.8 if verified else u**1.25  # verified hosts ask a premium
    per_gpu = _interp(u, ((0, model.price_p10 * 0.75), (.1, model.price_p10), (.5, model.price_median),
                          (.9, model.price_p90), (1, model.price_p90 * 1.35)))
    per_gpu *= 1.0 + 0.02 * (num_gpus.bit_length() - 1)  # bigger bundles cost slightly more per GPU
    return round(per_gpu * num_gpus, 4)


def _dlperf(rng: random.Random, model: GpuModel, *, num_gpus: int, pcie_bw: float) -> float:
    nvlink = model.nvlink_gb_per_s > 0
    per_gpu_scale = {1: 1.0, 2: 0.97 if nvlink else 0.94, 3: 0.9, 4: 0.95 if nvlink else 0.85, 6: 0.8,
                     8: 0.92 if nvlink else 0.78}[num_gpus]
    link = 0.9 if pcie_bw < 8 else 1.0
    return round(model.dlperf * num_gpus * per_gpu_scale * link * rng.uniform(0.92, 1.08), 2)


def _cpu(rng: random.Random, *, num_gpus: int, datacenter: bool) -> tuple[str, int, float, float, int]:
    per_gpu = _interp(rng.random(), ((0, 4), (.05, 6.4), (.1, 8), (.25, 12), (.5, 18), (.75, 32), (.9, 48),
                                     (1, 64)))
    effective = float(max(4, min(224, round(per_gpu * num_gpus))))
    cores = next(c for c in (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256) if c >= effective)
    name = rng.choice(_DATACENTER_CPUS if datacenter else _CONSUMER_CPUS)
    ghz = round(rng.uniform(2.0, 3.5) if datacenter else rng.uniform(3.0, 5.5), 2)
    ram_gb_per_gpu = rng.choices((32, 64, 128, 192, 256), weights=(25, 30, 20, 15, 10))[0]
    return name, cores, effective, ghz, ram_gb_per_gpu * num_gpus * 1024


def _driver(rng: random.Random, model: GpuModel) -> tuple[str, int, float]:
    choices = [d for d in _DRIVERS if model.compute_cap < 1200 or d[1] >= 12.8]
    version, cuda = rng.choice(choices)
    major, minor, patch = (int(part) for part in version.split("."))
    return version, major * 1_000_000 + minor * 1000 + patch, cuda


def _draw_machine(rng: random.Random, *, index: int, host: _Host, model: GpuModel, now: float) -> Machine:
    machine_id = MACHINE_ID_BASE + index * 3 + rng.randrange(3)
    num_gpus = _num_gpus(rng, model)
    vram_gb = rng.choices([v for v, _ in model.vram_variants_gb], weights=[w for _, w in model.vram_variants_gb])[0]
    pci_gen, lanes, pcie_bw = _pcie(rng, model, datacenter=host.datacenter)
    cpu_name, cores, effective, ghz, ram_mb = _cpu(rng, num_gpus=num_gpus, datacenter=host.datacenter)
    driver, driver_vers, cuda = _driver(rng, model)
    disk_bw = _interp(rng.random(), ((0, 400), (.05, 633), (.1, 1362), (.25, 2464), (.5, 3801), (.75, 6022),
                                     (.9, 9111), (1, 14000)))
    disk_gb = 1000 * _interp(rng.random(), ((0, .1), (.05, .17), (.1, .27), (.25, .57), (.5, 1.24), (.75, 2.67),
                                            (.9, 4.8), (1, 8)))
    dph_base = _gpu_price(rng, model, verified=host.verification == "verified", num_gpus=num_gpus)
    min_bid_ratio = rng.choices((0.4, 0.5, 0.8, 1.0), weights=(30, 40, 20, 10))[0] * rng.uniform(0.95, 1.05)
    storage_cost = _interp(rng.random(), ((0, .067), (.05, .11), (.1, .13), (.25, .2), (.5, .2), (.75, .29),
                                          (.9, .4), (.95, .67), (1, 1.0)))
    rented = rng.random() < model.rented_share
    public = PublicSpecs(
        machine_id=machine_id, num_gpus=num_gpus, vram_gb=vram_gb, pci_gen=pci_gen, pcie_bw=pcie_bw,
        cpu_cores_effective=effective, cpu_ghz=ghz, disk_bw=disk_bw, inet_down=host.inet_down,
        reliability=host.reliability, is_datacenter=host.datacenter, bw_nvlink=model.nvlink_gb_per_s,
    )
    return Machine(
        offer_id=OFFER_ID_BASE + index * 13 + rng.randrange(13),
        machine_id=machine_id, host_id=host.host_id, num_gpus=num_gpus, gpu_name=model.name,
        gpu_ram_mb=vram_gb * 1024, gpu_arch="nvidia", gpu_lanes=lanes,
        gpu_mem_bw=round(model.mem_bw_gb_per_s * rng.uniform(0.8, 0.85), 1),
        gpu_max_power=float(model.tdp_w if rng.random() < 0.85 else round(model.tdp_w * rng.uniform(0.7, 0.9))),
        gpu_max_temp=float(rng.choice((83, 85, 87, 90, 92))),
        gpu_display_active=not host.datacenter and rng.random() < 0.05,
        compute_cap=model.compute_cap, cuda_max_good=cuda, driver_version=driver, driver_vers=driver_vers,
        bw_nvlink=model.nvlink_gb_per_s, total_flops=round(model.fp32_tflops * num_gpus, 2),
        dlperf=_dlperf(rng, model, num_gpus=num_gpus, pcie_bw=pcie_bw),
        cpu_name=cpu_name, cpu_arch="amd64", cpu_cores=cores, cpu_cores_effective=effective, cpu_ghz=ghz,
        cpu_ram_mb=ram_mb, disk_space_gb=round(disk_gb, 1), disk_bw=round(disk_bw, 1), disk_name=rng.choice(_DISKS),
        mobo_name=rng.choice(_DATACENTER_BOARDS if host.datacenter else _CONSUMER_BOARDS),
        os_version=rng.choice(("20.04", "22.04", "22.04", "24.04")), has_avx=0 if rng.random() < 0.02 else 1,
        pci_gen=pci_gen, pcie_bw=pcie_bw,
        inet_up=host.inet_up, inet_down=host.inet_down, inet_up_cost=host.inet_up_cost,
        inet_down_cost=host.inet_down_cost, direct_port_count=rng.choice((10, 20, 50, 100, 500, 1000)),
        static_ip=host.datacenter or rng.random() < 0.4,
        public_ipaddr=host.ip_address,
        hostname=f"host{host.host_id}",
        dph_base=dph_base, min_bid=round(dph_base * min(1.0, min_bid_ratio), 4),
        storage_cost=round(storage_cost, 4), credit_discount_max=round(rng.uniform(0.2, 0.4), 3),
        platform_fee=0.0, reliability=host.reliability,
        expected_reliability=round(min(0.9999, host.reliability * rng.uniform(0.99, 1.005)), 4),
        verification=host.verification, external=host.external, hosting_type=1 if host.datacenter else 0,
        geolocation=host.place, geolocode=host.geolocode, vms_enabled=host.datacenter and rng.random() < 0.5,
        cluster_id=host.host_id if host.datacenter and rng.random() < 0.3 else None,
        start_date=round(now - rng.uniform(1, 400) * DAY_S), end_date=round(now + rng.uniform(3, 365) * DAY_S),
        rentable=not rented, rented=rented,
        truth=draw_truth(rng, model=model, specs=public),
    )
