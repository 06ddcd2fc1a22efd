"""The environment a result was measured in: GPU, driver, versions, host, project commit.

`fingerprint(device)` returns a flat dict whose keys are the columns of db/schema.py's `environment`
table plus `fingerprint`, a hash of every field except `git_commit` (results carry their own commit,
so one calibration serves every commit on a machine). Without a GPU the GPU fields are "cpu"/0/"".
"""
from __future__ import annotations

import functools
import hashlib
import json
import platform
import socket
import subprocess
import sys
from pathlib import Path

import torch

HASHED = ("device_type", "gpu_name", "compute_capability", "sm_count", "l2_bytes", "memory_bytes", "driver", "cuda",
          "torch", "triton", "python", "hostname", "cpu")


def fingerprint_hash(fp: dict) -> str:
    return hashlib.sha256(json.dumps({k: fp.get(k) for k in HASHED}, sort_keys=True).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The project's git commit (with "+dirty" when tracked files differ), or "" outside a checkout
    (an installed kernelbench: then $KERNELBENCH_GIT_COMMIT if set)."""
    import os
    env = os.environ.get("KERNELBENCH_GIT_COMMIT")
    if env:
        return env
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        if not sha:
            return ""
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def _driver() -> str:
    try:
        import pynvml  # optional
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
        return out[0].strip() if out else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint(device: str | torch.device | None = None) -> dict:
    """Describe the machine for `device` ("cuda", "cuda:1", "cpu"; default: cuda if available)."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = ""
    fp = {"device_type": dev.type, "torch": torch.__version__, "triton": triton_version,
          "python": platform.python_version(), "hostname": socket.gethostname(), "cpu": _cpu_name(),
          "git_commit": git_commit(), "cuda": torch.version.cuda or ""}
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device is visible (torch.cuda.is_available() is False)")
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        p = torch.cuda.get_device_properties(idx)
        fp.update(gpu_name=p.name, compute_capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                  l2_bytes=int(getattr(p, "L2_cache_size", 0)), memory_bytes=int(p.total_memory), driver=_driver())
    else:
        fp.update(gpu_name="cpu", compute_capability="", sm_count=0, l2_bytes=0, memory_bytes=0, driver="")
    fp["extra"] = {"platform": platform.platform(), "executable": sys.executable}
    fp["fingerprint"] = fingerprint_hash(fp)
    return fp
