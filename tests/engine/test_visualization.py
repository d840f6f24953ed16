"""``--show-dir`` paints every test image, every rank's (EveryRankVisualizationHook)."""

import glob
import os
import os.path as osp
import subprocess
import sys

import cv2
import pytest

from tests.conftest import REPO, TINY_FCN, write_tiny_dataset
from tests.helpers import make_checkpoint


@pytest.mark.slow
def test_dist_test_with_two_ranks_paints_every_test_image(tmp_path):
    """5 val images on 2 gloo ranks (3 + 3, the sampler repeats one): 5 painted files, each the
    ground truth | prediction of its own image, named as a single process names them."""
    root = write_tiny_dataset(str(tmp_path / "data"), n_train=1, n_val=5)
    ckpt = make_checkpoint(str(tmp_path / "tiny.pth"), config=TINY_FCN)
    show = str(tmp_path / "show")
    cmd = ["bash", osp.join(REPO, "tools", "dist_test.sh"), TINY_FCN, ckpt, "2", "--show-dir"]
    cmd += [show, "--work-dir", str(tmp_path / "work"), "--cfg-options", f"data_root={root}"]
    path = f"{osp.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"  # its `python`
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO, PATH=path, PORT="29541")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    where = osp.join(show, "vis_data", "vis_image")
    painted = sorted(osp.basename(p) for p in glob.glob(osp.join(where, "*.png")))
    assert painted == [f"test_{i:03d}.jpg_0.png" for i in range(5)]
    log = proc.stdout + proc.stderr
    assert "painted 5 test images of 2 rank(s)" in log
    assert f"--show-dir: painted images (ground truth | prediction) in {where}" in log
    for i in range(5):  # left half: the image under its ground truth, right: the prediction
        image = cv2.imread(osp.join(root, "img_dir", "val", f"{i:03d}.jpg"))
        drawn = cv2.imread(osp.join(where, f"test_{i:03d}.jpg_0.png"))
        h, w = image.shape[:2]
        assert drawn.shape == (h, 2 * w, 3), (i, drawn.shape)
