"""The GPU model catalog of the simulated marketplace: specs, supply and prices as docs/simulator.md describes.

Prices are renter-side on-demand $/GPU-hr from the Dec-2025 snapshot (p10 / median / p90). ``workload_units_per_s``
is the hidden speed of one GPU on the simulator's reference workload (fp32, batch 32): it follows FP32 throughput and
memory bandwidth, deliberately NOT the provider's DLPerf score, so ranking by dlperf is only a rough guide.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model as Vast lists it (``name`` is the offer's ``gpu_name``)."""

    name: str
    vram_variants_gb: tuple[tuple[int, float], ...]  # (VRAM GB, probability) — modded or 40/80 GB variants
    mem_bw_gb_per_s: float            # datasheet; Vast measures ~80-85 % of it
    fp16_tflops: float                # dense tensor, FP32 accumulate
    fp32_tflops: float
    tdp_w: int
    pcie_gen: int
    pcie_lanes: int                   # native link width
    compute_cap: int                  # CC x 100, as in the offer JSON (890 = 8.9)
    price_p10: float                  # $/GPU-hr, renter side, Dec 2025
    price_median: float
    price_p90: float
    dlperf: float                     # Vast DLPerf for one GPU
    supply_gpus: int                  # GPUs listed in the Dec-2025 snapshot
    rented_share: float               # share of those GPUs rented
    verified_share: float             # share on verified hosts
    is_datacenter: bool               # datacenter part (hosted mostly in datacenters)
    nvlink_gb_per_s: float            # 0 without NVLink/SXM
    workload_units_per_s: float       # hidden: reference-workload speed of one ideal GPU (see module doc)


def _ref_speed(fp32_tflops: float, mem_bw: float) -> float:
    # The reference workload is a mix of compute-bound and memory-bound kernels.
    return round(6.0 * float(fp32_tflops**0.55) * float((mem_bw / 500.0) ** 0.45), 2)


def _m(name: str, vram: tuple[tuple[int, float], ...], bw: float, fp16: float, fp32: float, tdp: int, gen: int,
       lanes: int, cc: int, prices: tuple[float, float, float], dlperf: float, supply: tuple[int, float, float],
       datacenter: bool = False, nvlink: float = 0.0) -> GpuModel:
    return GpuModel(
        name=name, vram_variants_gb=vram, mem_bw_gb_per_s=bw, fp16_tflops=fp16, fp32_tflops=fp32, tdp_w=tdp,
        pcie_gen=gen, pcie_lanes=lanes, compute_cap=cc, price_p10=prices[0], price_median=prices[1],
        price_p90=prices[2], dlperf=dlperf, supply_gpus=supply[0], rented_share=supply[1],
        verified_share=supply[2], is_datacenter=datacenter, nvlink_gb_per_s=nvlink,
        workload_units_per_s=_ref_speed(fp32, bw),
    )


GPU_MODELS: tuple[GpuModel, ...] = (
    _m("RTX 3060", ((12, 1.0),), 360, 25.5, 12.7, 170, 4, 16, 860, (.04, .06, .10), 12.5, (1291, .48, .69)),
    _m("RTX 3080", ((10, .85), (12, .15)), 760, 59.5, 29.8, 320, 4, 16, 860, (.05, .08, .12), 27.4,
       (285, .36, .69)),
    _m("RTX 3090", ((24, 1.0),), 936, 71, 35.6, 350, 4, 16, 860, (.10, .16, .21), 45.2, (2360, .48, .69)),
    _m("RTX 4070 Ti", ((12, 1.0),), 504, 80, 40.1, 285, 4, 16, 890, (.07, .08, .12), 35.6, (82, .50, .79)),
    _m("RTX 4080", ((16, 1.0),), 717, 97.5, 48.7, 320, 4, 16, 890, (.12, .205, .26), 54.4, (42, .40, .71)),
    _m("RTX 4080S", ((16, .9), (32, .1)), 736, 104.5, 52.2, 320, 4, 16, 890, (.08, .15, .19), 56.1,
       (81, .47, .69)),
    _m("RTX 4090", ((24, .83), (48, .17)), 1008, 165.2, 82.6, 450, 4, 16, 890, (.26, .33, .42), 98.6,
       (4986, .48, .82)),
    _m("RTX 5060 Ti", ((16, 1.0),), 448, 47, 24.0, 180, 5, 8, 1200, (.06, .09, .20), 38.7, (379, .47, .66)),
    _m("RTX 5070 Ti", ((16, 1.0),), 896, 88, 44.1, 300, 5, 16, 1200, (.10, .11, .17), 76.1, (160, .54, .78)),
    _m("RTX 5080", ((16, 1.0),), 960, 113, 55.6, 360, 5, 16, 1200, (.12, .15, .19), 84.1, (185, .38, .59)),
    _m("RTX 5090", ((32, 1.0),), 1792, 209.5, 104.8, 575, 5, 16, 1200, (.30, .40, .60), 203,
       (3612, .67, .81)),
    _m("RTX A4000", ((16, 1.0),), 448, 76.7, 19.2, 140, 4, 16, 860, (.055, .08, .15), 21.6, (262, .40, .71)),
    _m("RTX A5000", ((24, 1.0),), 768, 111.1, 27.8, 230, 4, 16, 860, (.16, .20, .23), 35.3, (240, .59, .89)),
    _m("RTX A6000", ((48, 1.0),), 768, 154.8, 38.7, 300, 4, 16, 860, (.36, .38, .48), 55.2, (148, .33, .91)),
    _m("L4", ((24, 1.0),), 300, 121, 30.3, 72, 4, 16, 890, (.32, .38, .45), 25.6, (8, .25, .62), True),
    _m("L40S", ((48, 1.0),), 864, 362, 91.6, 350, 4, 16, 890, (.44, .60, .66), 95.2, (199, .36, .92), True),
    _m("A100 PCIE", ((40, .5), (80, .5)), 1745, 312, 19.5, 300, 4, 16, 800, (.13, .73, .73), 127.4,
       (63, .52, .70), True),
    _m("A100 SXM4", ((40, .4), (80, .6)), 1800, 312, 19.5, 400, 4, 16, 800, (.61, .99, 1.33), 131.8,
       (283, .60, .96), True, 600),
    _m("H100 PCIE", ((80, 1.0),), 2000, 756, 51.2, 350, 5, 16, 900, (1.05, 1.20, 1.40), 256, (5, .40, .60),
       True),
    _m("H100 SXM", ((80, 1.0),), 3350, 989, 67, 700, 5, 16, 900, (1.50, 1.86, 2.13), 354, (293, .67, .89),
       True, 900),
    _m("H100 NVL", ((94, 1.0),), 3900, 835, 60, 400, 5, 16, 900, (1.71, 2.13, 2.26), 377, (59, .39, .78), True,
       600),
    _m("H200", ((141, 1.0),), 4800, 989, 67, 700, 5, 16, 900, (2.01, 2.68, 2.99), 491, (538, .55, 1.0), True,
       900),
    _m("H200 NVL", ((141, 1.0),), 4800, 835, 60, 600, 5, 16, 900, (1.63, 2.16, 2.22), 453, (58, .64, .93), True,
       900),
)


def gpu_model(name: str) -> GpuModel:
    """The catalog entry for a ``gpu_name``; KeyError if the simulator does not know it."""
    for model in GPU_MODELS:
        if model.name == name:
            return model
    raise KeyError(name)


def gpu_names() -> list[str]:
    """Every ``gpu_name`` the simulated market lists, in catalog order."""
    return [model.name for model in GPU_MODELS]
