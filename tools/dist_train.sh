#!/usr/bin/env bash
# Multi-process training with torchrun (GPUs: NCCL; CPU-only machines: gloo, automatically).
#   bash tools/dist_train.sh CONFIG GPUS [train.py options]
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=host0 bash tools/dist_train.sh configs/ham_voc.py 8
# Exit code: 75 (signal) or 65 (divergence) when every rank stopped so (torchrun says 1), else
# torchrun's. SIGTERM/SIGINT/SIGHUP go on to torchrun, which passes them to the ranks.
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CODES=$(mktemp -d)  # each rank that stops on purpose writes its exit code here
trap 'rm -rf "$CODES"' EXIT
HAMSEG_RANK_CODES="$CODES" PYTHONPATH="$ROOT:${PYTHONPATH:-}" python -m torch.distributed.run \
    --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" --master_port="$PORT" \
    "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "${@:3}" &
RUN=$!
for SIG in TERM INT HUP; do trap "kill -$SIG $RUN 2>/dev/null || true" "$SIG"; done
CODE=0
wait "$RUN" || CODE=$?
while kill -0 "$RUN" 2>/dev/null; do CODE=0; wait "$RUN" || CODE=$?; done  # after a trap
STOPS=$(sort -u "$CODES"/* 2>/dev/null | tr '\n' ' ' || true)  # "75 ": every rank's code was 75
if [[ $CODE -ne 0 && $(ls "$CODES" | wc -l) -eq $GPUS && $STOPS =~ ^(75|65)\ $ ]]; then
    CODE=${STOPS% }
fi
exit "$CODE"
