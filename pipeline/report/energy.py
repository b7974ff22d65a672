"""Energy and power of model inference, by three methods; every figure carries its method name.

- `rapl`: Linux powercap package energy counters (intel-rapl:N/energy_uj), summed over the time
  windows in which the stage ran, counter wrap handled, idle baseline subtracted. Needs readable
  counters (root on most kernels since 2020; absent in most VMs and containers).
- `estimated-cpu-time`: process CPU seconds spent in the stage x per-core active power. The
  power is `cpu_tdp_w / logical cores` when a TDP is given (`--cpu-tdp`), else DEFAULT_CORE_W.
- `op-energy-45nm`: a theoretical figure from Horowitz (ISSCC 2014) 45 nm energies as used by
  Han et al. (2015): MACs x (multiply + add), other FLOPs x add, weights read once from DRAM,
  activations read and written once through SRAM. INT8 layers (FakeQuantize-fed, INT8 weights)
  use INT8 multiplies, 32-bit accumulation and 1-byte traffic. It shows why INT8 and smaller
  models save energy; it is not a measurement of this machine.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline.report.flops import ModelCount

RAPL = "rapl"
CPU_TIME = "estimated-cpu-time"
OP_ENERGY = "op-energy-45nm"
METHODS = (RAPL, CPU_TIME, OP_ENERGY)

# Active power of one busy core, W. A mid-range figure: TDP / cores is 5-7 W for desktop
# (65 W, 12 cores), laptop (28 W, 4 cores) and server parts (270 W, 40 cores) alike.
DEFAULT_CORE_W = 6.0

# pJ per operation / per 32-bit access at 45 nm, 0.9 V (Horowitz ISSCC 2014; Han et al. 2015, table 1).
PJ = {
    "fp32_mult": 3.7,
    "fp32_add": 0.9,
    "int8_mult": 0.2,
    "int8_add": 0.03,
    "int32_add": 0.1,  # INT8 products are accumulated in 32 bits
    "sram_32bit": 5.0,  # 32-bit read from a small on-chip SRAM cache
    "dram_32bit": 640.0,  # 32-bit DRAM read
}


@dataclass
class Energy:
    method: str
    mj_per_inference: float | None
    avg_w: float | None
    available: bool = True
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


# ---- rapl -----------------------------------------------------------------------------------

_PACKAGE = re.compile(r"^intel-rapl:\d+$")  # packages only; sub-zones intel-rapl:N:M are inside them


class Rapl:
    """Package energy counters under a powercap root (a parameter so tests can use a fake tree)."""

    def __init__(self, root: str | Path = "/sys/class/powercap"):
        self.root = Path(root)
        self.zones = sorted(p for p in self.root.glob("intel-rapl:*") if _PACKAGE.match(p.name)) if self.root.is_dir() else []
        self.reason = ""
        if not self.zones:
            self.reason = f"no intel-rapl package zones under {self.root}"
        else:
            try:
                self.sample()
            except OSError as e:
                self.reason = f"powercap counters not readable ({e.strerror}; usually root-only)"
        self._max = {z.name: int((z / "max_energy_range_uj").read_text()) for z in self.zones} if not self.reason else {}
        self.joules = 0.0
        self.seconds = 0.0
        self._start: tuple[float, dict[str, int]] | None = None

    @property
    def available(self) -> bool:
        return not self.reason

    def sample(self) -> dict[str, int]:
        return {z.name: int((z / "energy_uj").read_text()) for z in self.zones}

    def delta_j(self, before: dict[str, int], after: dict[str, int]) -> float:
        """Energy between two samples, all packages; a counter that went down wrapped once."""
        total = 0
        for zone, b in before.items():
            a = after[zone]
            total += a - b if a >= b else a + self._max[zone] - b
        return total / 1e6

    # Accumulate over many windows: start() / stop() around each run of the stage.
    def start(self) -> None:
        self._start = (time.perf_counter(), self.sample())

    def stop(self) -> None:
        t0, s0 = self._start
        self.joules += self.delta_j(s0, self.sample())
        self.seconds += time.perf_counter() - t0
        self._start = None

    def idle_w(self, seconds: float = 1.0) -> float:
        """Package power while this process sleeps: the baseline to subtract."""
        s0, t0 = self.sample(), time.perf_counter()
        time.sleep(seconds)
        return self.delta_j(s0, self.sample()) / (time.perf_counter() - t0)


def rapl_energy(meter: Rapl, inferences: int, idle_w: float) -> Energy:
    if not meter.available:
        return Energy(RAPL, None, None, available=False, note=meter.reason)
    if not inferences or meter.seconds <= 0:
        return Energy(RAPL, None, None, available=False, note="no measured windows")
    active_j = max(meter.joules - idle_w * meter.seconds, 0.0)
    return Energy(RAPL, 1e3 * active_j / inferences, active_j / meter.seconds,
                  note=f"package energy over {meter.seconds:.2f} s, idle baseline {idle_w:.1f} W subtracted")


# ---- estimated-cpu-time ---------------------------------------------------------------------

def core_watts(cpu_tdp_w: float | None = None) -> tuple[float, str]:
    if cpu_tdp_w:
        cores = os.cpu_count() or 1
        return cpu_tdp_w / cores, f"--cpu-tdp {cpu_tdp_w:g} W / {cores} logical cores"
    return DEFAULT_CORE_W, f"default {DEFAULT_CORE_W:g} W per busy core"


def cpu_time_energy(cpu_seconds: float, wall_seconds: float, inferences: int, cpu_tdp_w: float | None = None) -> Energy:
    """Energy from the process CPU time spent in the stage (all OpenVINO threads count)."""
    if not inferences or wall_seconds <= 0:
        return Energy(CPU_TIME, None, None, available=False, note="no measured windows")
    watts, how = core_watts(cpu_tdp_w)
    joules = cpu_seconds * watts
    return Energy(CPU_TIME, 1e3 * joules / inferences, joules / wall_seconds,
                  note=f"{cpu_seconds:.2f} CPU s over {wall_seconds:.2f} s wall x {how}")


# ---- op-energy-45nm -------------------------------------------------------------------------

def op_energy_pj(counts: ModelCount) -> dict[str, float]:
    """Theoretical energy of one inference, pJ, split into compute / weights / activations."""
    compute = weights = activations = 0.0
    for layer in counts.layers:
        if layer.int8:
            compute += layer.macs * (PJ["int8_mult"] + PJ["int32_add"])
            act_in_bytes = 1
        else:
            compute += layer.macs * (PJ["fp32_mult"] + PJ["fp32_add"])
            act_in_bytes = 4
        compute += (layer.flops - 2 * layer.macs) * PJ["fp32_add"]
        weights += layer.weight_bytes / 4 * PJ["dram_32bit"]
        activations += (layer.activation_in * act_in_bytes + layer.activation_out * 4) / 4 * PJ["sram_32bit"]
    return {"compute": compute, "weights": weights, "activations": activations,
            "total": compute + weights + activations}


def op_energy(counts: ModelCount, latency_s: float | None = None) -> Energy:
    pj = op_energy_pj(counts)
    mj = pj["total"] * 1e-9
    return Energy(OP_ENERGY, mj, (mj / 1e3 / latency_s) if latency_s else None,
                  note=(f"45 nm table: compute {pj['compute'] * 1e-9:.3f} mJ, weights from DRAM {pj['weights'] * 1e-9:.3f} mJ, "
                        f"activations via SRAM {pj['activations'] * 1e-9:.3f} mJ; W at the measured p50 latency"))
