"""Datasheet peaks of the GPUs our users run or we measure on: leads, not ceilings.

A roofline drawn from these numbers is what the card could do by the vendor's word. `kernelbench
calibrate` measures the real ceilings (copy bandwidth, matmul rates) and roofline.py prefers them;
these rows serve a card nobody here owns (the RTX PRO 6000 Blackwell our users run) and the
"faster than the hardware" check in timing.py, which must use the highest rate the card could
reach (a measured copy can be under the datasheet, a kernel cannot be over it).

Dense tensor-core rates, fp32 accumulation, no structured sparsity. Where a vendor quotes only the
sparse figure, the dense one is half of it and the row says so.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

SM120_SMEM_PER_BLOCK = 101_376   # bytes; sm_120 opt-in maximum (CUDA C Programming Guide, table
                                 # "Technical Specifications per Compute Capability", 12.0: 99 KB)
SM90_SMEM_PER_BLOCK = 232_448    # bytes; sm_90 / sm_100 opt-in maximum (same table, 9.0: 227 KB)


@dataclass(frozen=True)
class SMLimits:
    """What one SM holds at once (CUDA C Programming Guide, "Technical Specifications per Compute Capability"):
    shared memory per SM, of which the runtime reserves 1 KB per resident block; 32-bit registers, allocated to a warp
    in units of 256 (a thread's count rounded up to a multiple of 8); resident warps; resident blocks."""
    smem_bytes: int
    registers: int
    warps: int
    blocks: int
    reserved_smem: int = 1024
    reg_unit: int = 256

    def programs(self, num_warps: int, registers: int, shared_bytes: int) -> int:
        """Programs (CTAs) of a kernel resident on one SM at once: the least that shared memory, registers, warps
        and the block cap allow. 0 for a kernel that cannot launch (no warps, or a block past the SM's shared
        memory); a kernel's per-block limit (99 KB on sm_120) is the inspector's separate check."""
        if num_warps <= 0 or shared_bytes + self.reserved_smem > self.smem_bytes:
            return 0
        warp_regs = -(-max(registers, 1) * 32 // self.reg_unit) * self.reg_unit
        return min(self.blocks, self.warps // num_warps, self.registers // (warp_regs * num_warps),
                   self.smem_bytes // (shared_bytes + self.reserved_smem))


# by compute capability x 10: sm_90 / sm_100 228 KB of shared memory and 64 warps an SM; sm_120 (like sm_86 / sm_89)
# 100 KB and 48 warps
SM_LIMITS = {90: SMLimits(233_472, 65_536, 64, 32), 100: SMLimits(233_472, 65_536, 64, 32),
             120: SMLimits(102_400, 65_536, 48, 32)}


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    arch: int                 # compute capability x 10 (90, 100, 120)
    sms: int
    memory_gb: float
    bandwidth_gbps: float     # DRAM, GB/s (1e9 bytes/s)
    bf16_tflops: float        # dense
    fp8_tflops: float         # dense
    fp4_tflops: float         # dense; 0 where the card has no fp4 tensor cores
    l2_bytes: int
    smem_per_block: int
    source: str

    def as_dict(self) -> dict:
        return asdict(self)


DEVICES: dict[str, DeviceSpec] = {d.name: d for d in (
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/): SXM 141 GB HBM3e,
    # 4.8 TB/s, BF16 1,979 and FP8 3,958 TFLOPS "with sparsity" -> 989.5 / 1,979 dense. L2: 60 MiB as
    # torch reports it on our H200 (shared/anchors/h200-2026-11-29-detail.md, L2_bytes 62914560).
    DeviceSpec("NVIDIA H200", 90, 132, 141, 4800, 989.5, 1979, 0, 62_914_560, SM90_SMEM_PER_BLOCK,
               "NVIDIA H200 datasheet (SXM); L2 from torch on the lent H200"),
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/): SXM 80 GB HBM3,
    # 3.35 TB/s, BF16 1,979 / FP8 3,958 sparse; L2 50 MB (H100 architecture whitepaper).
    DeviceSpec("NVIDIA H100 80GB HBM3", 90, 132, 80, 3350, 989.5, 1979, 0, 52_428_800, SM90_SMEM_PER_BLOCK,
               "NVIDIA H100 datasheet (SXM5) and H100 whitepaper"),
    # NVIDIA DGX B200 / HGX B200 datasheet: per GPU 180 GB HBM3e at 8 TB/s, FP4 18 PF, FP8 9 PF, BF16
    # 4.5 PF, all sparse -> 9 / 4.5 / 2.25 PF dense. 148 SMs, 126 MB L2 (Blackwell architecture brief).
    DeviceSpec("NVIDIA B200", 100, 148, 180, 8000, 2250, 4500, 9000, 132_120_576, SM90_SMEM_PER_BLOCK,
               "NVIDIA HGX B200 datasheet; SM and L2 counts from the Blackwell architecture brief"),
    # NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet: 96 GB GDDR7 ECC at 1,792 GB/s,
    # 188 SMs, 4,000 "AI TOPS" (FP4 with sparsity) -> FP4 2,000, FP8 1,000, BF16 500 dense (each
    # precision step halves the rate on this generation; an estimate, not a datasheet row).
    # L2 128 MB (GB202 full die). 99 KB shared memory per block (compute capability 12.0).
    DeviceSpec("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 120, 188, 96, 1792, 500, 1000, 2000,
               134_217_728, SM120_SMEM_PER_BLOCK,
               "NVIDIA RTX PRO 6000 Blackwell datasheet; dense rates derived from the sparse FP4 AI TOPS"),
    # NVIDIA RTX Blackwell GPU architecture whitepaper (GeForce RTX 5090): 32 GB GDDR7 at 1,792 GB/s,
    # 170 SMs, 96 MB L2; FP4 3,352 AI TOPS sparse; GeForce halves fp32-accumulate tensor rates:
    # BF16 209.5 and FP8 419 dense with fp32 accumulation, FP4 1,676 dense.
    DeviceSpec("NVIDIA GeForce RTX 5090", 120, 170, 32, 1792, 209.5, 419, 1676, 100_663_296, SM120_SMEM_PER_BLOCK,
               "NVIDIA RTX Blackwell architecture whitepaper, appendix table (RTX 5090)"),
)}

ALIASES = {
    "h200": "NVIDIA H200", "h100": "NVIDIA H100 80GB HBM3", "b200": "NVIDIA B200",
    "rtx-pro-6000": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "sm120": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "rtx-5090": "NVIDIA GeForce RTX 5090",
}


def find(name: str) -> DeviceSpec | None:
    """The datasheet row for a device name as torch reports it ("NVIDIA H200", "NVIDIA H100 80GB
    HBM3", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition") or an alias; None if unknown."""
    if name in DEVICES:
        return DEVICES[name]
    if name.lower() in ALIASES:
        return DEVICES[ALIASES[name.lower()]]
    low = name.lower()
    for key, spec in DEVICES.items():   # "NVIDIA H200 NVL", "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        stem = " ".join(key.lower().split()[:3 if "rtx" in key.lower() else 2])
        if low.startswith(stem):
            return spec
    return None


def get(name: str) -> DeviceSpec:
    spec = find(name)
    if spec is None:
        raise KeyError(f"no datasheet row for device {name!r}; known: {', '.join(DEVICES)} "
                       f"(aliases {', '.join(ALIASES)})")
    return spec
