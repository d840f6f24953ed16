#!/usr/bin/env bash
# Multi-process training with torchrun (GPUs: NCCL; CPU-only machines: gloo), as mmseg's script:
#   bash tools/dist_train.sh CONFIG GPUS [train.py options]
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=host0 bash tools/dist_train.sh configs/ham_voc.py 8
# A SIGUSR1, SIGTERM, SIGINT (Ctrl-C) or SIGHUP sent to this script or its process group reaches
# every rank once, through torchrun: all stop after the same iteration with one checkpoint, and
# the script exits 75 once no rank is left. The ranks then have STOP_TIMEOUT seconds (default
# 600) before torchrun SIGKILLs them. Exit codes as tools/train.py's (75, 65, 2: said once, not
# by every rank and torchrun). docs/robustness.md, "Launchers".
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CODES=$(mktemp -d) # each rank writes its pid, and its exit code if it stops on purpose
trap 'rm -rf "$CODES"' EXIT
# torchrun's options as its PET_<OPTION> variables: a torchrun without the option (torch 2.6
# has neither) ignores them, where it would refuse them on its command line
export PET_SIGNALS_TO_HANDLE=${PET_SIGNALS_TO_HANDLE:-SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1}
export PET_SHUTDOWN_TIMEOUT=${STOP_TIMEOUT:-600}
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT=$PET_SHUTDOWN_TIMEOUT
export HAMSEG_RANK_CODES=$CODES PYTHONPATH="$ROOT:${PYTHONPATH:-}"
export HAMSEG_COMMAND="bash $(printf '%q ' "$0" "$@")" # what a stopped run says to resume it
# torchrun in its own session: a signal to this script's process group reaches the script
# only, which passes the first one on and ignores the next while the ranks write the checkpoint
setsid python -m torch.distributed.run --nnodes="$NNODES" --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" --nproc_per_node="$GPUS" --master_port="$PORT" \
    "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "${@:3}" &
LAUNCHER=$!
pass_on() { trap '' USR1 INT TERM HUP; kill -"$1" "$LAUNCHER" 2>/dev/null || true; }
trap 'pass_on USR1' USR1
trap 'pass_on INT' INT
trap 'pass_on TERM' TERM HUP
until wait "$LAUNCHER"; CODE=$?; ! kill -0 "$LAUNCHER" 2>/dev/null; do :; done
for PID in $(cat "$CODES"/pid.* 2>/dev/null); do # torchrun died: its ranks stop by themselves
    while kill -0 "$PID" 2>/dev/null; do sleep 0.2; done
done
# the code every rank wrote when all stopped alike on purpose (hamseg.engine.stop.report_exit):
# 75, 65 or 2, although torchrun may report a failure
SEEN=$(sort -u "$CODES"/code.* 2>/dev/null || true)
[ "$(find "$CODES" -name 'code.*' | wc -l)" != "$GPUS" ] || [[ $SEEN == *$'\n'* ]] || CODE=${SEEN:-$CODE}
exit "$CODE"
