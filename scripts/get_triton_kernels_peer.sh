#!/usr/bin/env bash
# The MoE peer's source (kernels/peers.py, docs/perf/moe_peer.md) without a clone of the Triton repository: the
# triton_kernels package that the vLLM 0.17.0 wheel vendors (vllm/third_party/triton_kernels). vLLM 0.17.0 requires
# torch 2.10.0, whose triton is 3.6.0, the release kernels/peers.py is written for. Downloads the wheel (~430 MB,
# no dependencies) into a temporary folder, keeps only the package (~440 KB), writes VERSION, deletes the wheel.
#   bash scripts/get_triton_kernels_peer.sh .gpu_peers/triton_kernels   # then KERNELBENCH_TRITON_KERNELS=<that folder>
# Never commit the result (.gpu_peers is ignored; device calls carry it: scripts/device_lib.sh).
set -euo pipefail
DEST=${1:?usage: get_triton_kernels_peer.sh DEST_FOLDER}
VLLM=0.17.0       # fixed: VERSION below states its triton release (3.6), which another vLLM may not match
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 -m pip download -q --no-deps -d "$TMP" "vllm==$VLLM"
mkdir -p "$DEST"
rm -rf "$DEST/triton_kernels"
python3 - "$TMP" "$DEST" "$VLLM" <<'PY'
import pathlib, sys, zipfile
tmp, dest, vllm = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
wheel = next(tmp.glob("vllm-*.whl"))
prefix = "vllm/third_party/"
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix + "triton_kernels/") and not n.endswith("/")]
    if not names:
        sys.exit(f"{wheel.name} has no {prefix}triton_kernels: pick a vLLM release that vendors it")
    for n in names:
        out = dest / n[len(prefix):]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(z.read(n))
(dest / "VERSION").write_text(
    f"triton 3.6 (triton_kernels as vendored in the vLLM {vllm} wheel, vllm/third_party/triton_kernels; the wheel "
    "does not record the triton tag)\nFetched by scripts/get_triton_kernels_peer.sh. Triton's license (MIT) applies. "
    "Never committed.\n")
print(f"{len(names)} files -> {dest / 'triton_kernels'}")
PY
