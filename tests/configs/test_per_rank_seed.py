"""Per-rank seeds of the paper recipes: seed 66 (the release's), offset by the rank, so every GPU
draws its own NMF dictionaries (as in the release).

The torchrun test is the issue's acceptance test: 2 gloo processes of tools/train.py on a tiny
HamHead model, each dumping its first training-mode NMF dictionary; with
``randomness=dict(seed=66, diff_rank_seed=True)`` the two ranks' dictionaries differ (and their
initial weights are still equal: mmengine broadcasts rank 0's), with ``diff_rank_seed=False``
they are equal.
"""

from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from tests.conftest import REPO
from tests.helpers import paper_recipes
from tests.robust.helpers import TINY_HAM, TRAIN, data_options

RECIPE_SEED = dict(seed=66, diff_rank_seed=True)
RECIPES = [osp.relpath(path, REPO) for path in paper_recipes()]


def test_glob_finds_every_recipe_family():
    names = {osp.basename(p) for p in RECIPES}
    assert {"ham_voc.py", "ham_voc_trainval.py", "ham_voc_test.py", "ham_context.py"} <= names
    assert "hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py" in names and "nmf_bptt.py" in names


@pytest.mark.parametrize("config", RECIPES)
def test_recipes_seed_66_differently_on_every_rank(config):
    assert Config.fromfile(osp.join(REPO, config)).randomness == RECIPE_SEED


def train_two_ranks(tmp_path, data_root: str, diff_rank_seed: bool) -> list[dict]:
    """tools/train.py under torchrun with 2 CPU (gloo) processes; each rank's dump."""
    work = tmp_path / f"diff_{diff_rank_seed}"
    config = tmp_path / f"seed_{diff_rank_seed}.py"
    config.write_text(
        f"_base_ = [{TINY_HAM!r}]\n"
        "custom_imports = dict(imports=['hamseg', 'tests.data.nmf_dictionary_dump_hook'])\n"
        "custom_hooks = [dict(type='NMFDictionaryDumpHook')]\n"
        f"randomness = dict(seed=66, diff_rank_seed={diff_rank_seed})\n"
    )
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd = [*torchrun, TRAIN, str(config), "--launcher", "pytorch", "--work-dir", str(work)]
    cmd += ["--cfg-options", *data_options(data_root), "max_iters=1"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    # cwd: the final validation collects the ranks' results through ./.dist_test (mmengine)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return [torch.load(work / f"dictionary_rank{rank}.pth") for rank in (0, 1)]


@pytest.mark.slow
def test_two_ranks_draw_different_dictionaries_only_with_diff_rank_seed(tmp_path, tiny_data):
    rank0, rank1 = train_two_ranks(tmp_path, tiny_data, diff_rank_seed=True)
    assert rank0["world_size"] == rank1["world_size"] == 2
    assert (rank0["seed"], rank1["seed"]) == (66, 67)  # mmengine: seed + rank
    assert rank0["dictionary"].shape == rank1["dictionary"].shape
    assert rank0["dictionary"].shape[-1] == 4  # (B*S, D, R), R = 4 in tiny_ham.py
    assert not torch.allclose(rank0["dictionary"], rank1["dictionary"])
    for name, value in rank0["initial"].items():  # the weights still start equal
        assert torch.equal(value, rank1["initial"][name]), name

    same0, same1 = train_two_ranks(tmp_path, tiny_data, diff_rank_seed=False)
    assert (same0["seed"], same1["seed"]) == (66, 66)
    torch.testing.assert_close(same0["dictionary"], same1["dictionary"], rtol=0, atol=0)
    # seed 66 on rank 0 in both runs: the same first dictionary
    torch.testing.assert_close(same0["dictionary"], rank0["dictionary"], rtol=0, atol=0)
