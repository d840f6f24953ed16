"""tools/train.py and tools/test.py end to end on a tiny model (CPU): resume, errors, launchers
(torchrun, mpi, slurm scripts with a fake srun)."""

from __future__ import annotations

import os
import os.path as osp
import re
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO, TINY_FCN
from tests.helpers import run_tool_here

TRAIN = osp.join(REPO, "tools", "train.py")
TEST = osp.join(REPO, "tools", "test.py")


def data_options(root: str) -> list[str]:
    """--cfg-options that point every dataloader of tiny_fcn.py at ``root``."""
    return [f"{split}_dataloader.dataset.data_root={root}" for split in ("train", "val", "test")]


SLURM = (
    "error: --launcher slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST not set. Start the "
    "processes with slurm's srun: srun -p PARTITION -n N python -u tools/{tool} CONFIG --launcher "
    "slurm (or tools/slurm_train.sh, tools/slurm_test.sh)"
)


def run(args: list[str], extra_env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO, **(extra_env or {}))
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, **kwargs)


def train(work_dir: str, root: str, max_iters: int, *extra: str, stop_at: int = 0):
    """``stop_at``: end the loop there, before the schedule's end (an explicit mismatch)."""
    options = [*data_options(root), f"max_iters={max_iters}"]
    if stop_at:
        options.append(f"train_cfg.max_iters={stop_at}")
        extra += ("--allow-schedule-mismatch",)
    cmd = [sys.executable, TRAIN, TINY_FCN, "--work-dir", work_dir, *extra]
    result = run([*cmd, "--cfg-options", *options])
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def load(path: str) -> dict:
    return torch.load(path, map_location="cpu")  # weights_only=True: torch's default


def test_resume_continues_iterations_optimizer_and_schedule(tmp_path, tiny_data):
    straight, split = str(tmp_path / "straight"), str(tmp_path / "split")
    train(straight, tiny_data, 15)
    train(split, tiny_data, 15, stop_at=10)  # stopped at 10 of a 15-iteration schedule
    assert open(osp.join(split, "last_checkpoint")).read().strip().endswith("iter_10.pth")
    train(split, tiny_data, 15, "--resume")

    resumed, reference = (
        load(osp.join(split, "iter_15.pth")),
        load(osp.join(straight, "iter_15.pth")),
    )
    assert resumed["meta"]["iter"] == 15
    # 15 updates; the checkpoint hook runs before the scheduler's 15th step (lr of update 15)
    steps = resumed["param_schedulers"][0]["last_step"]
    assert steps == reference["param_schedulers"][0]["last_step"] == 14
    lr = resumed["optimizer"]["param_groups"][0]["lr"]
    assert lr == pytest.approx(reference["optimizer"]["param_groups"][0]["lr"], rel=1e-9)
    assert lr == pytest.approx(1e-4, rel=1e-9)  # poly schedule over 15 iterations: ends at eta_min
    at_10 = load(osp.join(split, "iter_10.pth"))["optimizer"]["param_groups"][0]["lr"]
    # mmengine PolyLR over [0, 15) decays to eta_min in 14 steps: lr_t = base * (1 - t/14)^0.9
    assert at_10 == pytest.approx((0.01 - 1e-4) * (1 - 10 / 14) ** 0.9 + 1e-4, rel=1e-6)
    # the resumed run went through the same 15 updates as the uninterrupted run
    for name, value in reference["state_dict"].items():
        torch.testing.assert_close(resumed["state_dict"][name], value, rtol=1e-5, atol=1e-6)
    momenta = [s["momentum_buffer"] for s in resumed["optimizer"]["state"].values()]
    momenta_ref = [s["momentum_buffer"] for s in reference["optimizer"]["state"].values()]
    for got, want in zip(momenta, momenta_ref, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_resume_from_explicit_path_and_test_tool(tmp_path, tiny_data):
    work = str(tmp_path / "work")
    train(work, tiny_data, 5)
    # a longer schedule than the checkpoint's: rebuilt on request (else refused)
    train(work, tiny_data, 10, "--resume", osp.join(work, "iter_5.pth"), "--extend-schedule")
    assert load(osp.join(work, "iter_10.pth"))["meta"]["iter"] == 10
    out = str(tmp_path / "pred")
    cmd = [sys.executable, TEST, TINY_FCN, osp.join(work, "iter_10.pth"), "--work-dir", work]
    result = run([*cmd, "--out", out, "--cfg-options", *data_options(tiny_data)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mIoU" in result.stdout + result.stderr
    assert sorted(os.listdir(out)) == ["000.png", "001.png"]


def test_weights_only_default_is_untouched():
    import inspect

    assert inspect.signature(torch.load).parameters["weights_only"].default is None
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in os.environ
    assert torch.serialization._default_to_weights_only(None) is True


@pytest.mark.parametrize(
    "tool,args,expected",
    [
        (TRAIN, ["configs/nope.py"], "error: config file not found: configs/nope.py"),
        (TEST, ["configs/nope.py", TINY_FCN], "error: config file not found: configs/nope.py"),
        (TEST, [TINY_FCN, "missing.pth"], "error: checkpoint file not found: missing.pth"),
        (TRAIN, [TINY_FCN, "--resume", "gone.pth"], "error: checkpoint to resume from not found"),
        # stage 2 of a recipe whose stage 1 trained in another work dir
        (
            TRAIN,
            [TINY_FCN, "--resume", "--cfg-options", "load_from=work_dirs/ham_voc/iter_60000.pth"],
            f"error: load_from checkpoint not found: work_dirs/ham_voc/iter_60000.pth, relative to "
            f"{REPO} (set another with --cfg-options load_from=PATH)",
        ),
        # --launcher mpi is a valid choice (test.py: the checkpoint error comes first) ...
        (
            TEST,
            [TINY_FCN, "missing.pth", "--launcher", "mpi"],
            "error: checkpoint file not found: missing.pth",
        ),
        # ... that needs OpenMPI's mpirun
        (TRAIN, [TINY_FCN, "--launcher", "mpi"], "error: --launcher mpi: OMPI_COMM_WORLD_RANK"),
        # --launcher slurm outside srun (mmengine: KeyError 'SLURM_PROCID')
        (TRAIN, [TINY_FCN, "--launcher", "slurm"], SLURM.format(tool="train.py")),
        (TEST, [TINY_FCN, TINY_FCN, "--launcher", "slurm"], SLURM.format(tool="test.py")),
    ],
)
def test_missing_files_give_one_line_and_exit_2(tool, args, expected, monkeypatch, capsys):
    code, _, err = run_tool_here(tool, args, monkeypatch, capsys)
    assert code == 2
    assert err.strip().startswith(expected)
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


@pytest.mark.slow
def test_torchrun_two_cpu_processes_keep_ranks_identical(tmp_path, tiny_data):
    work = str(tmp_path / "ddp")
    config = tmp_path / "ddp_cfg.py"
    config.write_text(
        f"_base_ = [{TINY_FCN!r}]\n"
        "custom_imports = dict(imports=['hamseg', 'tests.data.rank_dump_hook'])\n"
        "custom_hooks = [dict(type='RankStateDumpHook')]\n"
    )
    cmd = ["bash", osp.join(REPO, "tools", "dist_train.sh"), str(config), "2"]
    cmd += ["--work-dir", work, "--cfg-options", *data_options(tiny_data)]
    # dist_train.sh calls `python`: make it this interpreter
    path = f"{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    env = dict(PATH=path, PORT="29533")
    result = run([*cmd, "max_iters=4"], env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = load(osp.join(work, "rank0.pth")), load(osp.join(work, "rank1.pth"))
    assert rank0["iter"] == rank1["iter"] == 4 and rank0["world_size"] == 2
    initial = rank0["initial"]
    changed = 0
    for name, value in rank0["state_dict"].items():
        assert torch.equal(value, rank1["state_dict"][name]), name
        changed += int(not torch.equal(value, initial[name]))
    assert changed > 10  # training really updated the parameters


def fake_srun(tmp_path) -> dict:
    """An ``srun`` on PATH that logs its argv (one per line) and MASTER_PORT; the env to use."""
    fake = tmp_path / "srun"
    fake.write_text(
        '#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$SRUN_LOG"\n'
        'echo "MASTER_PORT=${MASTER_PORT:-}" > "$SRUN_LOG.env"\n'
    )
    fake.chmod(0o755)
    env = dict(PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}", SRUN_LOG=str(tmp_path / "log"))
    return env  # GPUS, GPUS_PER_NODE unset: the recipes' 8 and 8


def srun_argv(tmp_path) -> list[str]:
    return (tmp_path / "log").read_text().split("\n")[:-1]


OPTIONS = ["--work-dir", "wd", "--resume", "--amp", "--cfg-options", "a.b=1", "c=[1, 2]"]


def test_slurm_train_passes_everything_after_the_config_to_train_py(tmp_path):
    env = fake_srun(tmp_path)
    script = osp.join(REPO, "tools", "slurm_train.sh")
    result = run(["bash", script, "gpu", "job", "configs/ham_voc.py", *OPTIONS], env)
    assert result.returncode == 0, result.stderr
    argv = srun_argv(tmp_path)
    assert argv[:2] == ["-p", "gpu"] and "--ntasks=8" in argv and "--gres=gpu:8" in argv  # 8x2
    assert "--disable-status" in argv  # one Ctrl-C (or SIGTERM, sent as SIGINT) reaches the tasks
    tail = argv[argv.index("python") :]
    assert tail[2].endswith("tools/train.py")
    assert tail[3:] == ["configs/ham_voc.py", "--launcher", "slurm", *OPTIONS]
    # the old 4th positional WORK_DIR would now reach train.py as a stray argument: refused
    result = run(["bash", script, "gpu", "job", "configs/ham_voc.py", "wd", "--amp"], env)
    assert result.returncode == 2 and not (tmp_path / "log2").exists()
    assert result.stderr.strip() == (
        "error: slurm_train.sh: unexpected argument 'wd' after CONFIG; give the work dir as "
        "--work-dir wd"
    )


def test_slurm_test_and_dist_scripts_pass_their_options_through(tmp_path):
    env = fake_srun(tmp_path)
    script = osp.join(REPO, "tools", "slurm_test.sh")
    result = run(["bash", script, "gpu", "job", "cfg.py", "ckpt.pth", "--tta", "--out", "o"], env)
    assert result.returncode == 0, result.stderr
    tail = srun_argv(tmp_path)[srun_argv(tmp_path).index("python") + 2 :]
    assert tail[1:] == ["cfg.py", "ckpt.pth", "--launcher", "slurm", "--tta", "--out", "o"]
    fake_python = tmp_path / "python"  # dist_*.sh exec `python -m torch.distributed.run ...`
    fake_python.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$SRUN_LOG"\n')
    fake_python.chmod(0o755)
    for script, args in (
        ("dist_train.sh", ["cfg.py", "2"]),
        ("dist_test.sh", ["cfg.py", "c", "2"]),
    ):
        result = run(["bash", osp.join(REPO, "tools", script), *args, *OPTIONS], env)
        assert result.returncode == 0, result.stderr
        argv = srun_argv(tmp_path)
        assert argv[argv.index("--launcher") + 1 :] == ["pytorch", *OPTIONS]


def test_slurm_submit_is_a_requeueable_batch_job_that_always_resumes(tmp_path):
    script = osp.join(REPO, "tools", "slurm_submit.sh")
    directives = [line.split()[1] for line in open(script) if line.startswith("#SBATCH")]
    assert "--requeue" in directives and "--open-mode=append" in directives
    signal_opt = next(d for d in directives if d.startswith("--signal="))
    assert signal_opt.startswith("--signal=USR1@")  # no "B:": the srun tasks get it
    assert int(signal_opt.split("@")[1]) >= 60

    env = dict(fake_srun(tmp_path), SLURM_JOB_ID="123456", SLURM_SUBMIT_DIR=REPO)
    result = run(["bash", script, "configs/ham_voc.py", "--amp", "--cfg-options", "a=1"], env)
    assert result.returncode == 0, result.stderr
    argv = srun_argv(tmp_path)
    assert argv[:3] == ["--kill-on-bad-exit=1", "--disable-status", "python"]
    assert argv[4] == osp.join(REPO, "tools", "train.py")
    assert argv[5:] == [
        "configs/ham_voc.py",
        "--launcher",
        "slurm",
        "--resume",
        "--amp",
        "--cfg-options",
        "a=1",
    ]
    assert (tmp_path / "log.env").read_text().strip() == f"MASTER_PORT={20000 + 123456 % 20000}"


@pytest.mark.slow
def test_bare_resume_with_a_load_from_config_trains_then_continues(tmp_path, tiny_data):
    """The configs/custom/ situation: load_from names a pretrained checkpoint; every start of a
    (requeued) job passes a bare --resume."""
    pretrained_dir = str(tmp_path / "pretrained")
    train(pretrained_dir, tiny_data, 6)
    pretrained = osp.join(pretrained_dir, "iter_6.pth")
    config = tmp_path / "finetune.py"
    config.write_text(
        f"_base_ = [{TINY_FCN!r}]\n"
        "custom_imports = dict(imports=['hamseg', 'tests.data.rank_dump_hook'])\n"
        "custom_hooks = [dict(type='RankStateDumpHook')]\n"
        f"load_from = {pretrained!r}\n"
    )
    work = str(tmp_path / "work")
    cmd = [sys.executable, TRAIN, str(config), "--work-dir", work, "--resume", "--cfg-options"]
    # a 7-iteration schedule whose first start ends its loop at 4 (the schedule unchanged)
    first = run([*cmd, *data_options(tiny_data), "max_iters=7", "train_cfg.max_iters=4"])
    assert first.returncode == 0, first.stderr[-3000:]
    assert "a new run from load_from=" in first.stdout + first.stderr
    started = load(osp.join(work, "rank0.pth"))
    assert started["iter"] == 4  # trained 4 iterations from iteration 0 (not from 6)
    weights = load(pretrained)["state_dict"]
    for name, value in started["initial"].items():  # ... starting from the pretrained weights
        assert torch.equal(value, weights[name]), name
    assert load(osp.join(work, "iter_4.pth"))["meta"]["iter"] == 4

    second = run([*cmd, *data_options(tiny_data), "max_iters=7"])
    assert second.returncode == 0, second.stderr[-3000:]
    output = second.stdout + second.stderr
    assert f"Resuming from the latest complete checkpoint {osp.join(work, 'iter_4.pth')}" in output
    assert "resumed epoch: 0, iter: 4" in output
    assert load(osp.join(work, "rank0.pth"))["iter"] == 7
    assert load(osp.join(work, "iter_7.pth"))["meta"]["iter"] == 7


@pytest.mark.slow
def test_mpi_launcher_trains_with_the_variables_mpirun_sets(tmp_path, tiny_data):
    """No OpenMPI here: the variables OpenMPI's mpirun gives every process are set by hand for
    a 1-process world; mmengine's mpi launcher reads exactly these."""
    env = dict(
        OMPI_COMM_WORLD_RANK="0",
        OMPI_COMM_WORLD_SIZE="1",
        OMPI_COMM_WORLD_LOCAL_RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT="29561",
    )
    work = str(tmp_path / "mpi")
    cmd = [sys.executable, TRAIN, TINY_FCN, "--work-dir", work, "--launcher", "mpi"]
    result = run([*cmd, "--cfg-options", *data_options(tiny_data), "max_iters=2"], env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Distributed launcher: mpi" in result.stdout + result.stderr
    assert load(osp.join(work, "iter_2.pth"))["meta"]["iter"] == 2


@pytest.mark.slow
def test_a_longer_schedule_on_resume_is_refused_or_rebuilt_with_extend_schedule(
    tmp_path, tiny_data
):
    work = str(tmp_path / "work")
    train(work, tiny_data, 4)
    dumped = osp.join(work, "tiny_fcn.py")
    before = open(dumped).read()
    options = [*data_options(tiny_data), "max_iters=8"]
    path = osp.join(work, "iter_4.pth")
    cmd = [sys.executable, TRAIN, TINY_FCN, "--work-dir", work, "--resume", path]
    result = run([*cmd, "--cfg-options", *options])
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip() == (
        f"error: --resume {path}: it was trained with schedulers ending at [4] (max_iters=4), "
        "this config's end at [8] (max_iters=8), and resuming keeps the checkpoint's: resume it "
        "with --cfg-options max_iters=4, or train longer from its weights in a new run "
        f"(--cfg-options load_from={path} max_iters=8, without --resume; or --extend-schedule: "
        "this config's schedulers, rebuilt at the checkpoint's iteration)"
    )
    assert open(dumped).read() == before  # the dumped config is the trained one still
    # --extend-schedule: this config's schedulers, as if the run had had them from the start
    extended = run([*cmd, "--extend-schedule", "--cfg-options", *options])
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert re.search(
        r"--extend-schedule: the config's schedulers \(ending at \[8\], the checkpoint's at "
        r"\[4\]\) rebuilt at iteration 4: lr \S+ -> \S+",
        extended.stdout,
    )
    straight = str(tmp_path / "straight")
    train(straight, tiny_data, 8)
    got, want = load(osp.join(work, "iter_8.pth")), load(osp.join(straight, "iter_8.pth"))
    assert got["param_schedulers"] == want["param_schedulers"]  # steps, ends, last values
    lrs = [[g["lr"] for g in c["optimizer"]["param_groups"]] for c in (got, want)]
    assert lrs[0] == lrs[1]
