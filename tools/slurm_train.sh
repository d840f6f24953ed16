#!/usr/bin/env bash
# Training on a slurm cluster, one task per GPU.
#   bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [WORK_DIR] [train.py options]
#   GPUS=4 GPUS_PER_NODE=4 bash tools/slurm_train.sh gpu ham_voc configs/ham_voc.py
set -euo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=${4:-work_dirs/$(basename "$CONFIG" .py)}
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$ROOT:${PYTHONPATH:-}" srun -p "$PARTITION" --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" --kill-on-bad-exit=1 $SRUN_ARGS \
    python -u "$ROOT/tools/train.py" "$CONFIG" --work-dir="$WORK_DIR" --launcher slurm "${@:5}"
