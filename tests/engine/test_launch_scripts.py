"""tools/dist_train.sh and the slurm scripts: torchrun's options in a form every declared torch
accepts (checked with the installed torch's own parser; CI runs this on torch 2.6 and the
newest), the warning a rank gives where its torchrun cannot pass signals on, mmseg's command
lines, a batch refusal said once with exit 2, and the stop line's command that resumes the run."""

from __future__ import annotations

import json
import os
import os.path as osp
import re
import shlex
import signal
import subprocess
import sys

import pytest
import torch

from hamseg.engine.stop import launcher_warning
from tests.conftest import REPO, TINY_FCN
from tests.robust.helpers import data_options, finish, start_process, wait_for_line

SHIM = """import json, os, sys
argv = sys.argv[1:]
if argv[:2] != ["-m", "torch.distributed.run"]:
    os.execv(sys.executable, [sys.executable, *argv])
from torch.distributed.run import get_args_parser
args = get_args_parser().parse_args(argv[2:])  # what torchrun itself would refuse, it refuses
env = {k: v for k, v in os.environ.items() if k.startswith(("PET_", "TORCH_ELASTIC", "HAMSEG_"))}
with open(os.environ["SHIM_OUT"], "w") as f:
    json.dump(dict(vars(args), env=env, argv=argv), f, default=str)
"""


def python_shim(tmp_path) -> dict:
    """A ``python`` first on PATH that parses torchrun's command line with the installed torch's
    parser instead of launching (anything else runs as usual); the environment to use."""
    (tmp_path / "shim.py").write_text(SHIM)
    python = tmp_path / "python"
    python.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} {tmp_path / "shim.py"} "$@"\n')
    python.chmod(0o755)
    return dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("stop_timeout", [None, "900"])
def test_dist_train_sh_options_parse_with_the_installed_torchrun(tmp_path, stop_timeout):
    env = dict(python_shim(tmp_path), SHIM_OUT=str(tmp_path / "args.json"))
    env.pop("PET_SIGNALS_TO_HANDLE", None)
    if stop_timeout:
        env["STOP_TIMEOUT"] = stop_timeout
    options = ["--work-dir", "w d", "--cfg-options", "a=1"]
    script = osp.join(REPO, "tools", "dist_train.sh")
    done = subprocess.run(["bash", script, "cfg.py", "2", *options], env=env, timeout=120)
    assert done.returncode == 0
    args = json.loads((tmp_path / "args.json").read_text())
    assert int(args["nproc_per_node"]) == 2 and args["training_script"].endswith("tools/train.py")
    assert args["training_script_args"] == ["cfg.py", "--launcher", "pytorch", *options]
    if "signals_to_handle" in args:  # torch >= 2.11: from PET_SIGNALS_TO_HANDLE
        assert "SIGUSR1" in args["signals_to_handle"].split(",")
    if "shutdown_timeout" in args:  # torch >= 2.14
        assert int(args["shutdown_timeout"]) == int(stop_timeout or 600)
    assert shlex.split(args["env"]["HAMSEG_COMMAND"])[-4:] == options  # quoted: "w d"
    # the rank's warning under this agent and environment: none where torchrun takes both
    # options, else one naming what can be lost (torch 2.6: SIGUSR1 and the 30 s)
    old = os.environ.copy()
    try:
        os.environ.update(args["env"])
        warning = launcher_warning(["python", *args["argv"]])
    finally:
        os.environ.clear()
        os.environ.update(old)
    if "shutdown_timeout" in args:
        assert warning is None
    else:
        assert "SIGUSR1" in warning and "30 s" in warning


def test_plain_torchruns_warning_names_what_it_would_lose(monkeypatch):
    for name in ("PET_SIGNALS_TO_HANDLE", "PET_SHUTDOWN_TIMEOUT", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    warning = launcher_warning(["python", "-m", "torch.distributed.run", "train.py"])
    assert "SIGUSR1" in warning and "30 s" in warning
    argv = ["/venv/bin/python", "/venv/bin/torchrun", "--shutdown-timeout=600", "train.py"]
    monkeypatch.setenv("PET_SIGNALS_TO_HANDLE", "SIGTERM,SIGUSR1")
    warning = launcher_warning(argv)
    from torch.distributed.run import get_args_parser

    taken = vars(get_args_parser().parse_known_args(["x"])[0])
    if "shutdown_timeout" in taken:  # this torchrun takes both: nothing is lost
        assert warning is None
    else:  # torch 2.6: neither the option nor the variable reaches it
        assert "SIGUSR1" in warning and f"torch {torch.__version__}" not in warning


def fake_srun(tmp_path) -> dict:
    """An ``srun`` on PATH that logs its argv, one per line, to ``tmp_path/log``."""
    fake = tmp_path / "srun"
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$SRUN_LOG"\n')
    fake.chmod(0o755)
    return dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", SRUN_LOG=str(tmp_path / "log"))


def test_slurm_scripts_default_to_one_gpu_count_and_submit_passes_cpus_per_task(tmp_path):
    env = fake_srun(tmp_path)
    counts = []
    for script, args in (("slurm_train.sh", ["c.py"]), ("slurm_test.sh", ["c.py", "k.pth"])):
        cmd = ["bash", osp.join(REPO, "tools", script), "part", "job", *args]
        assert subprocess.run(cmd, env=env, timeout=60).returncode == 0
        counts.append([a for a in (tmp_path / "log").read_text().split() if "tasks" in a])
    assert counts[0] == counts[1] == [["--ntasks=8", "--ntasks-per-node=8"]][0]
    env.update(SLURM_CPUS_PER_TASK="7", SLURM_JOB_ID="5", SLURM_SUBMIT_DIR=REPO)
    cmd = ["bash", osp.join(REPO, "tools", "slurm_submit.sh"), "c.py"]
    assert subprocess.run(cmd, env=env, timeout=60).returncode == 0
    assert "--cpus-per-task=7" in (tmp_path / "log").read_text().split()


def tiny_config(tmp_path, *lines: str) -> str:
    path = tmp_path / "cfg.py"
    path.write_text("\n".join([f"_base_ = [{TINY_FCN!r}]", *lines]) + "\n")
    return str(path)


def dist_train(tmp_path, config: str, *options: str, new_session: bool = False):
    """tools/dist_train.sh CONFIG 2 on the tiny data, this interpreter as ``python``."""
    path = f"{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    env = dict(PATH=path, PORT=str(free_port()))
    cmd = ["bash", osp.join(REPO, "tools", "dist_train.sh"), config, "2", *options]
    return start_process(cmd, env, new_session=new_session)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_batch_refusal_under_dist_train_sh_is_one_line_and_exit_2(tmp_path, tiny_data):
    config = tiny_config(tmp_path, "auto_scale_lr = dict(base_batch_size=2)")  # 2 ranks x 2
    work = str(tmp_path / "work")
    proc, lines = dist_train(
        tmp_path, config, "--work-dir", work, "--cfg-options", *data_options(tiny_data)
    )
    code, output = finish(proc, lines, timeout=300)
    assert code == 2, output[-3000:]
    errors = [line for line in output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "base_batch_size" in errors[0], output[-3000:]
    assert "ChildFailedError" not in output and "Traceback" not in output


@pytest.mark.slow
def test_the_stop_line_prints_the_command_that_resumes_the_run(tmp_path, tiny_data):
    """tools/train.py (test_launchers.py runs tools/dist_train.sh's): run as printed, it resumes;
    the run's load_from on the command line is not repeated (--resume would resume it)."""
    config = tiny_config(
        tmp_path,
        "custom_imports = dict(imports=['hamseg', 'tests.robust.fault_hooks'])",
        "custom_hooks = [dict(type='SignalAtIterHook', at=2, mode='wait')]",
    )
    work = str(tmp_path / "work")
    options = ["--cfg-options", "load_from=None", *data_options(tiny_data), "max_iters=4"]
    cmd = [sys.executable, "tools/train.py", config, "--work-dir", work, *options]
    proc, lines = start_process(cmd, new_session=True)
    wait_for_line(lines, r"SIGNAL ME \d+", proc)
    os.killpg(proc.pid, signal.SIGUSR1)
    code, output = finish(proc, lines)
    assert code == 75, output[-3000:]
    (command,) = re.findall(r"continue with: (.*)$", output, re.M)
    argv = shlex.split(command)
    assert argv[:2] == [sys.executable, "tools/train.py"] and argv[-1] == "--resume"
    assert argv[argv.index("--cfg-options") + 1 :][:1] == data_options(tiny_data)[:1]
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    done = subprocess.run(
        command, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming at iteration 2" in done.stdout + done.stderr
    assert torch.load(osp.join(work, "iter_4.pth"))["meta"]["iter"] == 4
