#!/usr/bin/env bash
# The MoE peer's source (kernels/peers.py, docs/perf/moe_peer.md) without a clone of the Triton repository: the
# triton_kernels package that the vLLM 0.17.0 wheel vendors (vllm/third_party/triton_kernels). vLLM 0.17.0 requires
# torch 2.10.0, whose triton is 3.6.0, the release kernels/peers.py is written for. Downloads the wheel (~430 MB,
# no dependencies) into a temporary folder, keeps only the package (~440 KB) and writes VERSION; the wheel is deleted.
#   bash scripts/get_triton_kernels_peer.sh .gpu_peers/triton_kernels   # then KERNELBENCH_TRITON_KERNELS=<that folder>
# VLLM_WHEEL=<path to the vllm 0.17.0 wheel> uses a wheel already on disk instead of downloading it. An existing
# DEST/triton_kernels is replaced only once the new copy is complete. Never commit the result (.gpu_peers is ignored;
# device calls carry it: scripts/device_lib.sh).
set -euo pipefail
DEST=${1:?usage: get_triton_kernels_peer.sh DEST_FOLDER}
VLLM=0.17.0       # fixed: VERSION below states its triton release (3.6), which another vLLM may not match
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/wheel"
if [ -n "${VLLM_WHEEL:-}" ]; then
    cp "$VLLM_WHEEL" "$TMP/wheel/"
else
    python3 -m pip download -q --no-deps -d "$TMP/wheel" "vllm==$VLLM"
fi
python3 - "$TMP" "$DEST" "$VLLM" <<'PY'
import pathlib, shutil, sys, zipfile
tmp, dest, vllm = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
wheels = sorted((tmp / "wheel").glob("*.whl"))
if len(wheels) != 1:
    sys.exit(f"get_triton_kernels_peer: expected one wheel, found {[w.name for w in wheels]}")
prefix = "vllm/third_party/"
with zipfile.ZipFile(wheels[0]) as z:
    names = [n for n in z.namelist() if n.startswith(prefix + "triton_kernels/") and not n.endswith("/")]
    if not any(n == prefix + "triton_kernels/__init__.py" for n in names):
        sys.exit(f"get_triton_kernels_peer: {wheels[0].name} has no {prefix}triton_kernels package")
    staged = tmp / "staged"
    for n in names:
        out = staged / n[len(prefix):]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(z.read(n))
dest.mkdir(parents=True, exist_ok=True)
shutil.rmtree(dest / "triton_kernels", ignore_errors=True)
shutil.move(str(staged / "triton_kernels"), str(dest / "triton_kernels"))
(dest / "VERSION").write_text(
    f"triton 3.6 (triton_kernels as vendored in the vLLM {vllm} wheel {wheels[0].name}, vllm/third_party/"
    "triton_kernels; the wheel does not record the triton tag)\nFetched by scripts/get_triton_kernels_peer.sh. "
    "Triton's license (MIT) applies. Never committed.\n")
print(f"{len(names)} files -> {dest / 'triton_kernels'}")
PY
