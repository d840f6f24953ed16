# Sourced by tools/dist_train.sh, tools/slurm_train.sh and tools/slurm_submit.sh
# (docs/robustness.md, "Launchers").
#
#   supervise TERM_AS COMMAND...
#
# runs the launcher COMMAND (torchrun, srun) in its own session, so that a signal sent to this
# script's process group (a terminal's Ctrl-C; slurm or srun signalling the script) reaches this
# script only, and passes the first SIGUSR1, SIGTERM, SIGINT or SIGHUP on to COMMAND once:
# SIGUSR1 and SIGINT as they are, SIGTERM and SIGHUP as TERM_AS (srun turns a SIGTERM or SIGHUP
# it receives into SIGKILL for its tasks: TERM_AS=INT for srun). Later signals are ignored while
# the ranks write their checkpoint (torchrun stops waiting for its ranks on a second one).
# Returns COMMAND's exit code once it has exited.
supervise() {
    local term_as=$1
    shift
    setsid "$@" &
    SUPERVISED=$!
    trap '_supervise_pass_on USR1' USR1
    trap '_supervise_pass_on INT' INT
    trap "_supervise_pass_on $term_as" TERM HUP
    local code=0
    wait "$SUPERVISED" || code=$?
    while kill -0 "$SUPERVISED" 2>/dev/null; do # a trap ended the wait: wait again
        code=0
        wait "$SUPERVISED" || code=$?
    done
    return "$code"
}

_supervise_pass_on() {
    trap '' USR1 INT TERM HUP
    kill -"$1" "$SUPERVISED" 2>/dev/null || true
}

# stop_code CODE CODES TASKS: the exit code of a run whose launcher returned CODE: 75 (or 65)
# when all TASKS ranks wrote that code to CODES/code.RANK (they stopped on purpose: a signal, a
# divergence), although the launcher reports a failure (torchrun says 1; srun's
# --kill-on-bad-exit SIGKILLs the ranks still exiting once the first has exited with 75).
stop_code() {
    local code=$1 codes=$2 tasks=$3 stops wrote
    stops=$(sort -u "$codes"/code.* 2>/dev/null | tr '\n' ' ' || true) # "75 ": all 75
    wrote=$(ls "$codes" | grep -c '^code\.' || true)
    if [[ $code -ne 0 && $wrote -eq $tasks && $stops =~ ^(75|65)\ $ ]]; then
        code=${stops% }
    fi
    echo "$code"
}
