#!/usr/bin/env bash
# One command on a CUDA machine: the GPU tests, then the CUDA benchmarks (each writes its table
# and its JSON into its own folder), then a report (work_dirs/gpu_check/report.md and
# report.json: device, versions, every number; hamseg/benchmark/gpu_check.py).
# Without CUDA it says so and exits 0 after running nothing.
#   bash tools/gpu_check.sh            (PYTHON=... to choose the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
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
export HAMSEG_GPU_REPORT_DIR=$OUT
steps=()
step() {  # run a command, keep going on failure, remember its exit code and time
  local start=$SECONDS
  echo "== $*"
  "$@"
  local rc=$?
  steps+=("{\"command\": \"$*\", \"exit_code\": $rc, \"seconds\": $((SECONDS - start))}")
}
step "$PY" -m pytest -m gpu -v -rfE -p no:cacheprovider > >(tee "$OUT/pytest.txt")
step "$PY" tools/benchmark_context.py --device cuda --out-dir "$OUT/context"
step "$PY" tools/benchmark_model.py --device cuda --size 513 --batch 2 --out-dir "$OUT/model"
mkdir -p "$OUT/train_iter"
for precision in fp32 fp16 bf16; do  # a full-size ham_voc iteration and HamHead's share
  step "$PY" tools/benchmark_train_iter.py --device cuda --precision $precision --iters 10 \
    --out "$OUT/train_iter/$precision.json"
done
step "$PY" tools/benchmark_segnext.py --device cuda --out-dir "$OUT/segnext"
"$PY" -c "import hamseg; from hamseg.apis.demo import ensure_data; ensure_data('data/context_shapes')"  # val split
step "$PY" tools/benchmark_deploy.py --out-dir "$OUT/deploy"  # ONNX Runtime's CPU provider
(IFS=,; echo "[${steps[*]}]") > "$OUT/steps.json"
"$PY" -m hamseg.benchmark.gpu_check "$OUT"
if grep -q '"exit_code": [1-9]' "$OUT/steps.json"; then
  echo "some steps failed: see $OUT/report.md"
  exit 1
fi
