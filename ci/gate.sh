#!/usr/bin/env bash
# Regression gate for a CI job. Two modes:
#   ci/gate.sh inspect            CPU runner: compile every Triton kernel for sm_120 and fail on shared
#                                 memory over 101,376 bytes, spills, or a GEMM/attention kernel without
#                                 tensor-core instructions (plus lost tensor cores vs a baseline inspection)
#   ci/gate.sh bench              GPU runner: time the ops and fail on slowdowns beyond noise (IQR) or
#                                 timed outputs that differ from the reference, against a baseline
# Environment:
#   KB_BASELINE          bench baseline: a `kernelbench bench --json` file, or db:commit=<sha> / db:tag=<tag>
#                        / db:latest with KERNELBENCH_DB pointing at a kept database (default: ci/baseline/bench.json)
#   KB_INSPECT_BASELINE  inspection baseline (default: ci/baseline/inspect_sm120.json when present)
#   KB_OPS               ops to time (default: the decode-step GEMMs, MoE, attention and indexer)
#   KB_SHAPES            shape set (default flash-tp8); KB_TOLERANCE relative slowdown (default 0.05)
#   KB_OUT               where results go (default ./kb-ci); GITHUB_STEP_SUMMARY gets the markdown when set
set -euo pipefail
MODE=${1:-inspect}
OUT=${KB_OUT:-kb-ci}
mkdir -p "$OUT"
SUMMARY=${GITHUB_STEP_SUMMARY:-$OUT/summary.md}
KB="python3 -m kernelbench"
case "$MODE" in
  inspect)
    set +e
    $KB inspect --target sm_120 --shapes "${KB_SHAPES:-flash-tp8}" --json "$OUT/inspect_sm120.json" > "$OUT/inspect.log"
    set -e
    BASE=${KB_INSPECT_BASELINE:-ci/baseline/inspect_sm120.json}
    ARGS=(--inspect "$OUT/inspect_sm120.json")
    if [ -f "$BASE" ]; then ARGS+=(--inspect-baseline "$BASE"); fi
    $KB gate "${ARGS[@]}" --markdown "$SUMMARY" --json "$OUT/gate.json"
    ;;
  bench)
    OPS=${KB_OPS:-fp8_linear moe_experts moe_layer sparse_attention indexer_topk}
    # bench exits 1 when a result is wrong or above the roofline; the gate reports it as a finding
    $KB bench $OPS --impl triton --shapes "${KB_SHAPES:-flash-tp8}" --json "$OUT/bench.json" \
        --run-tag "ci-${GITHUB_SHA:-local}" > "$OUT/bench.log" || true
    $KB gate --baseline "${KB_BASELINE:-ci/baseline/bench.json}" --current "$OUT/bench.json" \
        --tolerance "${KB_TOLERANCE:-0.05}" --markdown "$SUMMARY" --json "$OUT/gate.json"
    ;;
  *)
    echo "usage: ci/gate.sh inspect|bench" >&2; exit 2 ;;
esac
