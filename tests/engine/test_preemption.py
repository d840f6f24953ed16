"""PreemptionHook: a real signal during training -> checkpoint of that iteration, requeue, exit 75.

The fast tests run mmengine Runners in this process and send real signals to it (the hook's
handlers catch them; a missing handler would end the test session). The slow ones run
tools/train.py, torchrun and a two-task slurm launch in subprocesses.
"""

import io
import os
import os.path as osp
import re
import signal
import socket
import sys
import time

import pytest
import torch
from mmengine.hooks import Hook

import tests.robust.fault_hooks  # noqa: F401  (registers SignalAtIterHook)
from hamseg.compat.checkpoint import is_complete_checkpoint
from hamseg.engine.preemption import (
    PreemptionHook,
    TrainingPreempted,
    ignore_signals_until_exit,
    protect_workers,
)
from tests.conftest import REPO, TINY_FCN
from tests.helpers import one_thread  # noqa: F401  (fixture)
from tests.robust.helpers import (
    TINY_HAM,
    TRAIN,
    data_options,
    finish,
    start_process,
    start_tool,
    tiny_cfg,
    train_until_stopped,
    wait_for_line,
)

pytestmark = pytest.mark.usefixtures("one_thread", "own_signal_handlers")


@pytest.fixture
def own_signal_handlers():
    """A stopped run keeps its handlers until the process exits: put this session's back."""
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)
    protect_workers(())


class Events(Hook):
    priority = "VERY_LOW"

    def __init__(self) -> None:
        self.events: list[str] = []

    def after_val(self, runner) -> None:
        self.events.append(f"val@{runner.iter}")

    def before_save_checkpoint(self, runner, checkpoint) -> None:
        self.events.append(f"save@{checkpoint['meta']['iter']}")

    def after_train(self, runner) -> None:
        self.events.append("after_train")


def run_until_signal(tmp_path, data: str, hooks: list, interval: int = 100):
    """tiny_ham.py for 4 iterations with ``hooks``; the TrainingPreempted (or None), the events,
    the work dir and the PreemptionHook."""
    work = str(tmp_path / "work")
    options = {"train_cfg.max_iters": 4, "train_cfg.val_interval": 2}
    cfg = tiny_cfg(data, work, {**options, "default_hooks.checkpoint.interval": interval})
    cfg.custom_hooks = hooks
    events = Events()
    stop, runner = train_until_stopped(cfg, events)
    assert stop is None or isinstance(stop, TrainingPreempted)
    hook = next(h for h in runner.hooks if isinstance(h, PreemptionHook))
    return stop, events.events, work, hook


def test_signal_names_and_numbers():
    hook = PreemptionHook(signals=["SIGUSR1", "usr1", 10, "TERM"], requeue_signals=[])
    assert hook.signals == (signal.SIGUSR1,) * 3 + (signal.SIGTERM,)
    with pytest.raises(KeyError):
        PreemptionHook(signals=["SIGNOPE"])


@pytest.mark.parametrize("sig,interval", [("SIGUSR1", 100), ("SIGINT", 100), ("SIGTERM", 2)])
def test_a_signal_checkpoints_that_iteration_then_stops_with_75(tmp_path, tiny_data, sig, interval):
    hooks = [dict(type="SignalAtIterHook", at=2, sig=sig), dict(type="PreemptionHook")]
    stop, events, work, hook = run_until_signal(tmp_path, tiny_data, hooks, interval)
    path = osp.join(work, "iter_2.pth")
    assert stop.exit_code == 75
    assert str(stop).startswith(f"training stopped by {sig} after iteration 2: {path} written")
    assert sorted(n for n in os.listdir(work) if n.endswith(".pth")) == ["iter_2.pth"]
    assert open(osp.join(work, "last_checkpoint")).read() == path
    checkpoint = torch.load(path)
    assert checkpoint["meta"]["iter"] == 2 and "optimizer" in checkpoint
    assert checkpoint["param_schedulers"][0]["last_step"] == 2  # as in a periodic iter_2.pth
    # saved once (also where the periodic save wrote it), no validation of the stop iteration
    # (val_interval=2), but the run's end hooks ran
    assert events == ["save@2", "after_train"]
    if sig == "SIGINT":  # a second Ctrl-C aborts at once
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler raises at the next bytecode; never slept out
    else:  # until the process exits, more signals are only recorded (e.g. torchrun's SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # would end this test session without the handler
        assert hook.received == [signal.Signals[sig]] + [signal.SIGTERM] * (sig != "SIGTERM")


def test_before_the_exit_only_the_hooks_signals_become_ignored():
    signal.signal(signal.SIGUSR2, signal.default_int_handler)  # someone else's handler
    try:
        PreemptionHook().before_train(None)
        assert ignore_signals_until_exit() == [signal.SIGINT, signal.SIGUSR1, signal.SIGTERM]
        assert (
            signal.getsignal(signal.SIGTERM) == signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
        )
        assert signal.getsignal(signal.SIGUSR2) == signal.default_int_handler
        assert ignore_signals_until_exit() == []  # nothing of the hook's left
    finally:
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)


def test_signal_at_the_last_iteration_just_finishes(tmp_path, tiny_data):
    before = signal.getsignal(signal.SIGUSR1)
    hooks = [dict(type="SignalAtIterHook", at=4), dict(type="PreemptionHook")]
    stop, events, *_ = run_until_signal(tmp_path, tiny_data, hooks)
    assert stop is None  # the run is complete: no exit 75, no requeue
    assert events == ["val@2", "save@4", "val@4", "after_train"]
    assert signal.getsignal(signal.SIGUSR1) == before  # the handlers are put back


def test_a_second_signal_while_saving_changes_nothing(tmp_path, tiny_data, monkeypatch):
    save = torch.save

    def interrupted_save(obj, handle, *args, **kwargs):
        buffer = io.BytesIO()
        save(obj, buffer, *args, **kwargs)
        data = buffer.getvalue()
        handle.write(data[: len(data) // 2])
        handle.flush()
        os.kill(os.getpid(), signal.SIGTERM)  # half the checkpoint is on disk
        handle.write(data[len(data) // 2 :])

    monkeypatch.setattr(torch, "save", interrupted_save)
    hooks = [dict(type="SignalAtIterHook", at=2), dict(type="PreemptionHook", requeue=False)]
    stop, events, work, hook = run_until_signal(tmp_path, tiny_data, hooks)
    monkeypatch.undo()
    assert "SIGUSR1 after iteration 2" in str(stop)
    assert hook.received == [signal.SIGUSR1, signal.SIGTERM]  # recorded, nothing else
    path = osp.join(work, "iter_2.pth")
    assert is_complete_checkpoint(path) and torch.load(path)["meta"]["iter"] == 2
    assert [n for n in os.listdir(work) if n.endswith(".tmp")] == []


def fake_scontrol(tmp_path, exit_code: int = 0) -> str:
    """An ``scontrol`` on PATH that logs its arguments (one call per line)."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    log, script = tmp_path / "scontrol.log", tmp_path / "bin" / "scontrol"
    script.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1 $2" = "show hostnames" ]; then echo 127.0.0.1; exit 0; fi\n'
        f'echo "$*" >> {log}\nexit {exit_code}\n'
    )
    script.chmod(0o755)
    return str(log)


@pytest.mark.parametrize(
    "sig,options,scontrol_exit,calls,note",
    [
        ("SIGUSR1", {}, 0, ["requeue 4242"], "; slurm job 4242 requeued;"),
        ("SIGTERM", {}, 0, [], "written; continue"),  # scancel sends SIGTERM: no requeue
        ("SIGUSR1", {"requeue": False}, 0, [], "written; continue"),  # the off switch
        ("SIGUSR1", {}, 1, ["requeue 4242"], "requeueing slurm job 4242 failed"),
    ],
)
def test_slurm_requeue_runs_once_with_the_job_id(
    tmp_path, tiny_data, monkeypatch, sig, options, scontrol_exit, calls, note
):
    log = fake_scontrol(tmp_path, scontrol_exit)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    hooks = [dict(type="SignalAtIterHook", at=2, sig=sig), dict(type="PreemptionHook", **options)]
    stop, *_ = run_until_signal(tmp_path, tiny_data, hooks)
    assert stop.exit_code == 75 and note in str(stop)
    assert (open(log).read().splitlines() if osp.exists(log) else []) == calls


# ------------------------------------------------------------------------------------------
# Real processes: tools/train.py, torchrun with 2 ranks, a 2-task slurm launch
# ------------------------------------------------------------------------------------------
def write_config(path, base: str, *lines: str) -> str:
    """A config inheriting ``base`` with the signal test hook importable, plus ``lines``."""
    text = [
        f"_base_ = [{base!r}]",
        "custom_imports = dict(imports=['hamseg', 'tests.robust.fault_hooks',"
        " 'tests.data.rank_dump_hook'], allow_failed_imports=False)",
        "default_hooks = dict(checkpoint=dict(interval=100))",
        *lines,
    ]
    path.write_text("\n".join(text) + "\n")
    return str(path)


def train_args(config: str, work: str, data: str, *extra: str, max_iters: int = 8) -> list[str]:
    options = [*data_options(data), f"max_iters={max_iters}"]
    return [TRAIN, config, "--work-dir", work, *extra, "--cfg-options", *options]


def assert_same_training_state(path: str, reference: str) -> None:
    """Weights, buffers and optimizer state of two checkpoints are identical, bit for bit."""
    got, want = torch.load(path), torch.load(reference)
    assert got["meta"]["iter"] == want["meta"]["iter"]
    assert got["state_dict"].keys() == want["state_dict"].keys()
    for name, value in want["state_dict"].items():
        assert torch.equal(got["state_dict"][name], value), name
    for key, state in want["optimizer"]["state"].items():
        assert torch.equal(
            got["optimizer"]["state"][key]["momentum_buffer"], state["momentum_buffer"]
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_sigterm_to_the_process_group_with_workers_then_resume_is_exact(tmp_path, tiny_data):
    """slurm signals every process of a step, DataLoader workers included; no seed configured:
    the resumed run takes the checkpoint's seed (the sampler's order depends on it)."""
    workers = "train_dataloader = dict(num_workers=1, persistent_workers=True)"
    hook = "custom_hooks = [dict(type='SignalAtIterHook', at=5, mode='wait')]"
    random = "randomness = dict(seed=None, diff_rank_seed=True, deterministic=True)"
    config = write_config(tmp_path / "term.py", TINY_HAM, random, workers, hook)
    work = str(tmp_path / "term")
    proc, lines = start_tool(train_args(config, work, tiny_data), new_session=True)
    wait_for_line(lines, r"^SIGNAL ME \d+", proc)
    os.killpg(proc.pid, signal.SIGTERM)  # the main process and its DataLoader worker
    code, output = finish(proc, lines)
    assert code == 75, output[-3000:]
    assert "exited unexpectedly" not in output  # the worker ignored the signal
    assert "training stopped by SIGTERM after iteration 5" in output
    seed = torch.load(osp.join(work, "iter_5.pth"))["meta"]["seed"]
    random = f"randomness = dict(seed={seed}, diff_rank_seed=True, deterministic=True)"
    reference = write_config(tmp_path / "reference.py", TINY_HAM, random, workers)
    ref_work = str(tmp_path / "reference")
    ref = start_tool(train_args(reference, ref_work, tiny_data))
    code, output = finish(*start_tool(train_args(config, work, tiny_data, "--resume")))
    assert code == 0, output[-3000:]
    assert finish(*ref)[0] == 0
    assert_same_training_state(osp.join(work, "iter_8.pth"), osp.join(ref_work, "iter_8.pth"))


def test_signals_while_the_stopped_process_exits_change_neither_code_nor_checkpoint(
    tmp_path, tiny_data
):
    """CPython resets Python signal handlers to the default action while it finalizes: a SIGTERM
    then (torchrun sends one to every rank once the first has exited) used to give -15."""
    hook = "custom_hooks = [dict(type='SignalAtIterHook', at=2)]"
    config = write_config(tmp_path / "exit.py", TINY_FCN, hook)
    work = str(tmp_path / "work")
    proc, lines = start_tool(train_args(config, work, tiny_data, max_iters=4))
    wait_for_line(lines, r"^training stopped by SIGUSR1 after iteration 2: ", proc)
    sent = 0
    while proc.poll() is None:  # SIGTERM every 10 ms until the process has exited
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            break
        sent += 1
        time.sleep(0.01)
    code, output = finish(proc, lines)
    assert code == 75 and sent >= 1 and "Traceback" not in output, (sent, output[-3000:])
    assert sorted(n for n in os.listdir(work) if n.endswith((".pth", ".tmp"))) == ["iter_2.pth"]
    assert is_complete_checkpoint(osp.join(work, "iter_2.pth"))


def torchrun(config: str, work: str, data: str, port: int, *extra: str, max_iters=6, **kwargs):
    """tools/dist_train.sh with 2 CPU processes (the Popen pid is the script's);
    ``new_session=True``: the script leads its own process group, as in a terminal."""
    cmd = ["bash", osp.join(REPO, "tools", "dist_train.sh"), config, "2", "--work-dir", work]
    cmd += [*extra, "--cfg-options", *data_options(data), f"max_iters={max_iters}"]
    path = f"{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    return start_process(cmd, dict(PATH=path, PORT=str(port)), **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["rank1", "launcher", "ctrl-c"])
def test_torchrun_a_signal_stops_both_ranks_after_the_same_iteration(tmp_path, tiny_data, target):
    rank = 1 if target == "rank1" else 0
    hooks = f"dict(type='SignalAtIterHook', at=3, mode='wait', sig='SIGTERM', rank={rank})"
    hooks = f"custom_hooks = [dict(type='RankStateDumpHook'), {hooks}]"
    config = write_config(tmp_path / "ddp.py", TINY_FCN, hooks)
    work = str(tmp_path / "work")
    proc, lines = torchrun(config, work, tiny_data, free_port(), new_session=target == "ctrl-c")
    pid = int(wait_for_line(lines, r"SIGNAL ME (\d+)", proc).group(1))
    if target == "ctrl-c":  # a terminal's Ctrl-C: SIGINT to the foreground process group, the
        # script and torchrun (the ranks lead their own sessions): torchrun gets it twice, from
        # the terminal and from the script's trap, and sends the ranks SIGINT, SIGTERM or both
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(pid if target == "rank1" else proc.pid, signal.SIGTERM)
    code, output = finish(proc, lines, timeout=300)  # no hang
    # torchrun says 1 (failed workers, or its own SignalException); every rank stopped with 75
    assert code == 75 and "forcefully exiting" not in output, output[-3000:]
    if target == "rank1":  # both ranks stopped alike: they exit 0 and the script says 75
        assert "training stopped by a signal to another rank after iteration 3" in output
        assert "ChildFailedError" not in output, output[-3000:]  # both agreed: said once
    else:  # the script passes it to torchrun, which passes it on, waits, then re-raises
        stopped_by = "(SIGINT|SIGTERM|SIGINT/SIGTERM)" if target == "ctrl-c" else "SIGTERM"
        assert re.search(f"training stopped by {stopped_by} after iteration 3", output)
        assert "SignalException" in output
    assert [n for n in sorted(os.listdir(work)) if n.startswith("iter_")] == ["iter_3.pth"]
    rank0, rank1 = torch.load(osp.join(work, "rank0.pth")), torch.load(osp.join(work, "rank1.pth"))
    saved = torch.load(osp.join(work, "iter_3.pth"))["state_dict"]
    assert rank0["iter"] == rank1["iter"] == 3
    for name, value in rank0["state_dict"].items():
        assert torch.equal(value, rank1["state_dict"][name]) and torch.equal(saved[name], value)


@pytest.mark.slow
def test_slurm_two_tasks_requeue_exactly_once(tmp_path, tiny_data):
    """Two tasks as srun starts them (SLURM_* variables, --launcher slurm); rank 1 gets SIGUSR1."""
    log = fake_scontrol(tmp_path)
    hook = "custom_hooks = [dict(type='SignalAtIterHook', at=2, rank=1)]"
    config = write_config(tmp_path / "slurm.py", TINY_FCN, hook)
    work = str(tmp_path / "work")
    env = dict(
        PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        SLURM_JOB_ID="4242",
        SLURM_NTASKS="2",
        SLURM_NODELIST="node0",
        MASTER_PORT=str(free_port()),
    )
    args = train_args(config, work, tiny_data, "--launcher", "slurm", max_iters=5)
    tasks = [start_tool(args, dict(env, SLURM_PROCID=str(r), SLURM_LOCALID=str(r))) for r in (0, 1)]
    results = [finish(*task, timeout=300) for task in tasks]
    assert [code for code, _ in results] == [75, 75], results[0][1][-3000:]
    assert open(log).read().splitlines() == ["requeue 4242"]  # once, by the main rank
    assert "slurm job 4242 requeued" in results[0][1]
    assert sorted(n for n in os.listdir(work) if n.endswith(".pth")) == ["iter_2.pth"]
