#!/usr/bin/env bash
# Training on a slurm cluster, one task per GPU, as mmseg's script (srun in the foreground; for a
# job that survives time limits and pre-emption, sbatch tools/slurm_submit.sh instead):
#   bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [train.py options]
#   GPUS=4 GPUS_PER_NODE=4 bash tools/slurm_train.sh gpu ham_voc configs/ham_voc.py --work-dir wd
# GPUS and GPUS_PER_NODE default to the recipes' 8. A SIGUSR1, SIGTERM, SIGINT (Ctrl-C) or SIGHUP
# sent to this script or its process group reaches every task once (SIGTERM and SIGHUP as
# SIGINT: srun would SIGKILL the tasks); all stop after the same iteration with one checkpoint.
set -euo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
if [ $# -ge 4 ] && [[ $4 != -* ]]; then
    echo "error: slurm_train.sh: unexpected argument '$4' after CONFIG; give the work dir as --work-dir $4" >&2
    exit 2
fi
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# where each task writes its exit code if it stops on purpose: a folder every node can see
CODES=$(mktemp -d "$ROOT/.hamseg-exit.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$CODES"' EXIT
export HAMSEG_RANK_CODES=$CODES PYTHONPATH="$ROOT:${PYTHONPATH:-}"
export HAMSEG_COMMAND="GPUS=$GPUS GPUS_PER_NODE=$GPUS_PER_NODE bash $(printf '%q ' "$0" "$@")"
# srun in its own session: a signal to this script's process group reaches the script only
setsid srun -p "$PARTITION" --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" --kill-on-bad-exit=1 --disable-status $SRUN_ARGS \
    python -u "$ROOT/tools/train.py" "$CONFIG" --launcher slurm "${@:4}" &
LAUNCHER=$!
pass_on() { trap '' USR1 INT TERM HUP; kill -"$1" "$LAUNCHER" 2>/dev/null || true; }
trap 'pass_on USR1' USR1
trap 'pass_on INT' INT TERM HUP
until wait "$LAUNCHER"; CODE=$?; ! kill -0 "$LAUNCHER" 2>/dev/null; do :; done
# the code every rank wrote when all stopped alike on purpose (hamseg.engine.stop.report_exit):
# 75, 65 or 2, although srun may report a failure
SEEN=$(sort -u "$CODES"/code.* 2>/dev/null || true)
[ "$(find "$CODES" -name 'code.*' | wc -l)" != "$GPUS" ] || [[ $SEEN == *$'\n'* ]] || CODE=${SEEN:-$CODE}
exit "$CODE"
