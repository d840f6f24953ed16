#!/usr/bin/env bash
# Testing on a slurm cluster, one task per GPU.
#   bash tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py options, e.g. --tta]
set -euo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
CHECKPOINT=$4
GPUS=${GPUS:-4}  # mmseg's defaults
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$ROOT:${PYTHONPATH:-}" srun -p "$PARTITION" --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" --kill-on-bad-exit=1 $SRUN_ARGS \
    python -u "$ROOT/tools/test.py" "$CONFIG" "$CHECKPOINT" --launcher slurm "${@:5}"
