#!/usr/bin/env bash
# A slurm batch job that survives time limits and pre-emption; submit it from the repository root:
#   sbatch [sbatch options] tools/slurm_submit.sh CONFIG [train.py options]
#   sbatch -p gpu --time=24:00:00 -J ham_voc tools/slurm_submit.sh configs/ham_voc.py
# It always trains with --resume (the work dir's latest checkpoint, or a new run). --signal sends
# SIGUSR1 to every task (no "B:": the training processes are srun tasks) 180 s before the time
# limit: they finish the iteration, write its checkpoint, requeue the job (--requeue) and exit 75;
# the requeued job runs this script again and resumes. A signal to the batch shell reaches every
# task once (SIGTERM/SIGHUP as SIGINT: srun would SIGKILL the tasks). sbatch's command-line
# options override the lines below. docs/robustness.md, "Launchers".
#SBATCH --job-name=hamseg
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gres=gpu:8
#SBATCH --cpus-per-task=5
#SBATCH --requeue
#SBATCH --signal=USR1@180
#SBATCH --open-mode=append
#SBATCH --output=slurm-%x-%j.out
set -euo pipefail
CONFIG=$1
ROOT=${HAMSEG_ROOT:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
# one rendezvous port per job, so that two jobs sharing a node do not collide
export MASTER_PORT=${MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 20000))}
echo "hamseg: job ${SLURM_JOB_ID:-?} start $((${SLURM_RESTART_COUNT:-0} + 1)) on ${SLURM_JOB_NODELIST:-?}"
# where each task writes its exit code if it stops on purpose: a folder every node can see
CODES=$(mktemp -d "$ROOT/.hamseg-exit.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$CODES"' EXIT
export HAMSEG_RANK_CODES=$CODES PYTHONPATH="$ROOT:${PYTHONPATH:-}"
export HAMSEG_COMMAND="sbatch $(printf '%q ' tools/slurm_submit.sh "$@")"
# srun in its own session: a signal to the batch shell's process group reaches the shell only.
# Slurm >= 22.05's srun no longer inherits --cpus-per-task from sbatch: passed on.
setsid srun --kill-on-bad-exit=1 --disable-status ${SLURM_CPUS_PER_TASK:+--cpus-per-task=$SLURM_CPUS_PER_TASK} \
    python -u "$ROOT/tools/train.py" "$CONFIG" --launcher slurm --resume "${@:2}" &
LAUNCHER=$!
pass_on() { trap '' USR1 INT TERM HUP; kill -"$1" "$LAUNCHER" 2>/dev/null || true; }
trap 'pass_on USR1' USR1
trap 'pass_on INT' INT TERM HUP
until wait "$LAUNCHER"; CODE=$?; ! kill -0 "$LAUNCHER" 2>/dev/null; do :; done
# the code every rank wrote when all stopped alike on purpose (hamseg.engine.stop.report_exit):
# 75, 65 or 2, although srun may report a failure
SEEN=$(sort -u "$CODES"/code.* 2>/dev/null || true)
[ "$(find "$CODES" -name 'code.*' | wc -l)" != "${SLURM_NTASKS:-1}" ] || [[ $SEEN == *$'\n'* ]] || CODE=${SEEN:-$CODE}
exit "$CODE"
