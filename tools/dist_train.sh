#!/usr/bin/env bash
# Multi-process training with torchrun (GPUs: NCCL; CPU-only machines: gloo, automatically).
#   bash tools/dist_train.sh CONFIG GPUS [train.py options]
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=host0 bash tools/dist_train.sh configs/ham_voc.py 8
# SIGUSR1, SIGTERM, SIGINT (Ctrl-C) or SIGHUP, sent to this script or its process group, reach
# every rank once (through torchrun): all stop after the same iteration with one checkpoint.
# STOP_TIMEOUT (seconds, default 600) is how long the ranks then have before torchrun SIGKILLs
# them. Exit code: 75 (signal) or 65 (divergence) when every rank stopped so (torchrun says 1),
# else torchrun's; the script returns once no rank is left. See docs/robustness.md.
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
STOP_TIMEOUT=${STOP_TIMEOUT:-600}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/tools/lib/supervise.sh"
CODES=$(mktemp -d) # each rank writes its pid, and its exit code if it stops on purpose
trap 'rm -rf "$CODES"' EXIT
export HAMSEG_RANK_CODES=$CODES PYTHONPATH="$ROOT:${PYTHONPATH:-}"
CODE=0
supervise TERM python -m torch.distributed.run \
    --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" --master_port="$PORT" \
    --signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 --shutdown-timeout="$STOP_TIMEOUT" \
    "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "${@:3}" || CODE=$?
for PID in $(cat "$CODES"/pid.* 2>/dev/null); do # torchrun killed: its ranks stop by themselves
    while kill -0 "$PID" 2>/dev/null; do sleep 0.2; done
done
exit "$(stop_code "$CODE" "$CODES" "$GPUS")"
