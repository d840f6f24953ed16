#!/usr/bin/env bash
# What a GPU session runs first (docs/gpu.md), in this order, each under its own time limit and
# each writing into $OUT (default work_dirs/gpu_check): the GPU tests (pytest -m gpu, JUnit XML),
# a whole-iteration capture of configs/ham_voc.py's training step
# (tools/analysis_tools/benchmark_train_step.py: eager, device-busy and compiled step, JSON), and
# the lab's task screen (projects/context_lab: verdict.md/json; it starts no run after its
# deadline, so a short lease still brings back seed 0 of every task). Exits 1 if a step failed;
# without CUDA it says so and exits 0.
#   bash tools/gpu_check.sh            GPU_CHECK_SCREEN_S=600 (the screen's limit), PYTHON=...
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUT=${OUT:-work_dirs/gpu_check}
SCREEN_S=${GPU_CHECK_SCREEN_S:-600}
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "no CUDA device: nothing to check"
  exit 0
fi
mkdir -p "$OUT"
export HAMSEG_GPU_REPORT_DIR=$OUT PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
failed=()
step() {  # step NAME LIMIT_S COMMAND...: its output in $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc"
  [ "$rc" -eq 0 ] || failed+=("$name")
}
step gpu_tests 240 "$PY" -m pytest -m gpu tests -q -rfE -p no:cacheprovider --junitxml "$OUT/gpu_tests.xml"
step train_step 240 "$PY" tools/analysis_tools/benchmark_train_step.py configs/ham_voc.py \
  --out "$OUT/train_step.json"
step screen "$SCREEN_S" "$PY" -m projects.context_lab.context_lab.screen --jobs 14 \
  --deadline-s $((SCREEN_S - 200)) --out-dir "$OUT/screen"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]} (logs in $OUT)"
  exit 1
fi
echo "all steps passed; results in $OUT"
