#!/usr/bin/env bash
# One command on a CUDA machine: the [gpu] measurements (tools/benchmark_gpu.py), the GPU tests,
# torch.compile, then the other CUDA benchmarks (each writes its table and its JSON into its own
# folder), then a report (work_dirs/gpu_check/report.md and report.json: device, versions, every
# number; tools/lab/benchmark/gpu_check.py). Steps run in that order, each under a time limit; a
# step that would start after GPU_CHECK_BUDGET seconds (default 1200) is skipped and reported
# (exit code "skipped"), so that a short lease still brings back the most important numbers;
# GPU_CHECK_COPY_TO=DIR writes DIR/gpu_check.tgz of the folder after every step.
# Without CUDA it says so and exits 0 after running nothing.
#   bash tools/gpu_check.sh            (PYTHON=... to choose the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
BUDGET=${GPU_CHECK_BUDGET:-1200}
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "error: $PY cannot import torch (activate hamseg's environment or set PYTHON=...)" >&2
  exit 2
fi
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "no CUDA device: nothing to check"
  exit 0
fi
OUT=work_dirs/gpu_check
rm -rf "$OUT" && mkdir -p "$OUT"
export HAMSEG_GPU_REPORT_DIR=$OUT PYTHONUNBUFFERED=1
steps=()
step() {  # step LIMIT_S COMMAND...: run it (killed after LIMIT_S), remember its exit code and time
  local limit=$1 start=$SECONDS
  shift
  local cmd=${*//\"/\\\"}  # a JSON string
  if ((SECONDS >= BUDGET)); then
    echo "== skipped (budget of $BUDGET s spent): $*"
    steps+=("{\"command\": \"$cmd\", \"exit_code\": \"skipped\", \"seconds\": 0}")
    return
  fi
  echo "== $*"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  steps+=("{\"command\": \"$cmd\", \"exit_code\": $rc, \"seconds\": $((SECONDS - start))}")
  if [ -n "${GPU_CHECK_COPY_TO:-}" ]; then  # what ran so far, for a lease that ends early
    (IFS=,; echo "[${steps[*]}]") > "$OUT/steps.json"
    tar czf "$GPU_CHECK_COPY_TO/gpu_check.tgz" "$OUT"
  fi
}
step 360 "$PY" tools/benchmark_gpu.py --device cuda --out-dir "$OUT/gpu"
step 150 "$PY" -m pytest -m gpu -v -rfE -p no:cacheprovider > >(tee "$OUT/pytest.txt")
step 240 "$PY" tools/benchmark_gpu.py --device cuda --parts compile --out-dir "$OUT/compile"
step 120 "$PY" tools/benchmark_context.py --device cuda --out-dir "$OUT/context"
step 120 "$PY" tools/benchmark_segnext.py --device cuda --out-dir "$OUT/segnext"
step 120 "$PY" tools/benchmark_model.py --device cuda --size 513 --batch 2 --out-dir "$OUT/model"
# the demo's val split, then ONNX Runtime's CPU provider on it
data="import hamseg; from hamseg.apis.demo import ensure_data; ensure_data('data/context_shapes')"
step 180 bash -c "$PY -c \"$data\" && $PY tools/benchmark_deploy.py --out-dir $OUT/deploy"
(IFS=,; echo "[${steps[*]}]") > "$OUT/steps.json"
"$PY" -m tools.lab.benchmark.gpu_check "$OUT"
if grep -q '"exit_code": [1-9]' "$OUT/steps.json"; then
  echo "some steps failed: see $OUT/report.md"
  exit 1
fi
