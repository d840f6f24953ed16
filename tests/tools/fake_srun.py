"""A stand-in for slurm's ``srun`` on one machine, with its signal handling (slurm 24/25
src/srun/signals.c, ``_forward_signal``): it starts ``--ntasks`` copies of the command, each in
its own session with slurm's task variables (as slurmstepd starts them, not as srun's children
in its process group), then

* passes SIGUSR1 and SIGUSR2 on to every task;
* turns SIGTERM, SIGHUP and SIGQUIT into SIGKILL for every task ("forcing job termination");
* on SIGINT prints the task states, or with ``--disable-status`` passes SIGINT on;
* with ``--kill-on-bad-exit=1`` SIGKILLs the other tasks once one exits with a non-zero code;

and exits with the highest task exit code (128 + N for a task killed by signal N). The task
pids go to ``$FAKE_SRUN_PIDS`` (one per line), its options to ``$SRUN_LOG`` if set.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

_WITH_VALUE = {"-p", "-J", "-n", "-N"}


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    """srun's options (``--name=value``, flags, ``-p VALUE``) and the command after them."""
    options, i = {}, 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in _WITH_VALUE:
            options[argv[i]], i = argv[i + 1], i + 2
        else:
            name, _, value = argv[i].partition("=")
            options[name], i = value or True, i + 1
    return options, argv[i:]


def main() -> int:
    options, command = parse(sys.argv[1:])
    if os.environ.get("SRUN_LOG"):
        with open(os.environ["SRUN_LOG"], "w") as log:
            log.write("\n".join(sys.argv[1:]) + "\n")
    ntasks = int(options.get("--ntasks") or os.environ.get("SLURM_NTASKS", "1"))
    tasks = []
    for rank in range(ntasks):
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank))
        env.update(SLURM_NTASKS=str(ntasks), SLURM_NODELIST="localhost", MASTER_ADDR="127.0.0.1")
        tasks.append(subprocess.Popen(command, env=env, start_new_session=True))
    with open(os.environ["FAKE_SRUN_PIDS"], "w") as pids:
        pids.write("".join(f"{task.pid}\n" for task in tasks))

    def send(signum: int) -> None:
        for task in tasks:
            if task.poll() is None:
                os.kill(task.pid, signum)

    def on_signal(signum: int, frame) -> None:
        if signum in (signal.SIGUSR1, signal.SIGUSR2):
            send(signum)
        elif signum == signal.SIGINT and options.get("--disable-status"):
            print("srun: sending Ctrl-C to the tasks", file=sys.stderr, flush=True)
            send(signum)
        elif signum == signal.SIGINT:
            print("srun: interrupt (one more within 1 sec to abort)", file=sys.stderr, flush=True)
        else:
            print("srun: forcing job termination", file=sys.stderr, flush=True)
            send(signal.SIGKILL)

    for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    while any(task.poll() is None for task in tasks):
        bad = any(task.returncode not in (None, 0) for task in tasks)
        if bad and options.get("--kill-on-bad-exit") == "1":
            send(signal.SIGKILL)
        time.sleep(0.05)
    codes = [code if code >= 0 else 128 - code for code in (t.returncode for t in tasks)]
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
