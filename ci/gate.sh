#!/usr/bin/env bash
# Regression gate for a CI job. Three modes:
#   ci/gate.sh inspect            CPU runner: compile every Triton kernel for sm_120 and fail on shared
#                                 memory over 101,376 bytes, spills, or a GEMM/attention kernel without
#                                 tensor-core instructions (plus lost tensor cores vs a baseline inspection)
#   ci/gate.sh bench              GPU runner: time the ops and fail on slowdowns beyond noise (IQR) or
#                                 timed outputs that differ from the reference, against a baseline
#   ci/gate.sh baseline           GPU runner, once: time the same ops and write the first bench baseline
#                                 ($KB_BASELINE, default ci/baseline/bench.json); review and commit it
# Environment:
#   KB_BASELINE          bench baseline: a `kernelbench bench --json` file, or db:commit=<sha> / db:tag=<tag>
#                        / db:latest with KERNELBENCH_DB pointing at a kept database (default: ci/baseline/bench.json)
#   KB_INSPECT_BASELINE  inspection baseline (default: ci/baseline/inspect_sm120.json when present)
#   KB_OPS               ops to time (default: the decode-step GEMMs, MoE, attention and indexer)
#   KB_SHAPES            shape set (default flash-tp8); KB_TOLERANCE relative slowdown (default 0.05)
#   KB_OUT               where results go (default ./kb-ci); GITHUB_STEP_SUMMARY gets the markdown when set
#   KB_STRICT            1 (default): a baseline result missing from this run fails the gate; 0: reported only
# A gate that compared nothing (an empty run, a baseline from another GPU) always fails.
set -euo pipefail
MODE=${1:-inspect}
OUT=${KB_OUT:-kb-ci}
mkdir -p "$OUT"
SUMMARY=${GITHUB_STEP_SUMMARY:-$OUT/summary.md}
KB="python3 -m kernelbench"
STRICT=()
if [ "${KB_STRICT:-1}" != "0" ]; then STRICT=(--strict); fi
OPS=${KB_OPS:-fp8_linear moe_experts moe_layer sparse_attention indexer_topk}
BENCH_BASELINE=${KB_BASELINE:-ci/baseline/bench.json}
case "$MODE" in
  inspect)
    set +e
    echo "compiling every Triton kernel for sm_120 (several minutes on a CPU runner; log: $OUT/inspect.log)" >&2
    $KB inspect --target sm_120 --shapes "${KB_SHAPES:-flash-tp8}" --json "$OUT/inspect_sm120.json" > "$OUT/inspect.log"
    set -e
    BASE=${KB_INSPECT_BASELINE:-ci/baseline/inspect_sm120.json}
    ARGS=(--inspect "$OUT/inspect_sm120.json")
    if [ -f "$BASE" ]; then ARGS+=(--inspect-baseline "$BASE"); fi
    $KB gate "${ARGS[@]}" "${STRICT[@]}" --markdown "$SUMMARY" --json "$OUT/gate.json"
    ;;
  bench)
    case "$BENCH_BASELINE" in
      db:*) ;;
      *) if [ ! -f "$BENCH_BASELINE" ]; then
           echo "ci/gate.sh bench: no bench baseline at $BENCH_BASELINE; write the first one on this GPU runner" \
                "with 'ci/gate.sh baseline' (then commit it), or point KB_BASELINE at one" >&2
           exit 2
         fi ;;
    esac
    # bench exits 1 when a result is wrong or above the roofline; the gate reports it as a finding
    $KB bench $OPS --impl triton --shapes "${KB_SHAPES:-flash-tp8}" --json "$OUT/bench.json" \
        --run-tag "ci-${GITHUB_SHA:-local}" > "$OUT/bench.log" || true
    $KB gate --baseline "$BENCH_BASELINE" --current "$OUT/bench.json" "${STRICT[@]}" \
        --tolerance "${KB_TOLERANCE:-0.05}" --markdown "$SUMMARY" --json "$OUT/gate.json"
    ;;
  baseline)
    case "$BENCH_BASELINE" in db:*) echo "ci/gate.sh baseline writes a file; set KB_BASELINE to a path" >&2; exit 2 ;; esac
    mkdir -p "$(dirname "$BENCH_BASELINE")"
    # bench exits 1 when a result is wrong: a baseline must not record wrong results
    $KB bench $OPS --impl triton --shapes "${KB_SHAPES:-flash-tp8}" --json "$BENCH_BASELINE" \
        --run-tag "baseline-${GITHUB_SHA:-local}"
    python3 -c "import json,sys; n=len(json.load(open(sys.argv[1]))['results']); print(f'{sys.argv[1]}: {n} results'); sys.exit(0 if n else 1)" "$BENCH_BASELINE"
    ;;
  *)
    echo "usage: ci/gate.sh inspect|bench|baseline" >&2; exit 2 ;;
esac
