#!/usr/bin/env bash
# A slurm batch job that survives time limits and pre-emption: submit it from the repository root,
#   sbatch [sbatch options] tools/slurm_submit.sh CONFIG [train.py options]
#   sbatch -p gpu --time=24:00:00 -J ham_voc tools/slurm_submit.sh configs/ham_voc.py
# It always trains with --resume: the latest checkpoint in the work dir, or a new run when there
# is none. --signal sends SIGUSR1 to every task (no "B:": the training processes are srun tasks,
# not the batch shell) 180 s before the time limit; hamseg then finishes the iteration, writes
# its checkpoint, requeues the job (--requeue allows it) and exits with code 75; the requeued job
# starts this script again (same job id, log appended) and resumes. A signal sent to the batch
# shell (scancel -b, a terminal) reaches every task once (SIGTERM/SIGHUP as SIGINT: srun would
# SIGKILL the tasks). Options on the sbatch command line override the lines below. See
# docs/robustness.md.
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
source "$ROOT/tools/lib/supervise.sh"
# where each task writes its exit code if it stops on purpose: a folder every node can see
CODES=$(mktemp -d "$ROOT/.hamseg-exit.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$CODES"' EXIT
export HAMSEG_RANK_CODES=$CODES PYTHONPATH="$ROOT:${PYTHONPATH:-}"
CODE=0
supervise INT srun --kill-on-bad-exit=1 --disable-status \
    python -u "$ROOT/tools/train.py" "$CONFIG" --launcher slurm --resume "${@:2}" || CODE=$?
exit "$(stop_code "$CODE" "$CODES" "${SLURM_NTASKS:-1}")"
