"""The VOC 2012 test-server submission: the writer, and the path end to end through tools/test.py.

A fake test split (images of odd sizes, a test.txt, no SegmentationClass folder, one image in
JPEGImages that is not listed) is predicted by a tiny HamNet through configs/ham_voc_test.py's
pipelines and evaluator, with and without --tta; the PNGs and the archive are checked against
what the server needs and, without --tta, against the model's own predictions.
"""

from __future__ import annotations

import os
import os.path as osp
import tarfile

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmseg.datasets import PascalVOCDataset
from PIL import Image

from hamseg.evaluation import VOCSubmissionMetric, voc_palette
from hamseg.evaluation.voc_submission import SUBMISSION_FOLDER
from tests.data.tiny_twin import save_checkpoint, tiny_model, write_split, write_tiny_twin
from tests.robust.helpers import TEST, run_tool

COMP6 = SUBMISSION_FOLDER.format(task="comp6")
SIZES = {"2008_000001": (37, 45), "2009_000017": (29, 31), "2010_000123": (41, 23)}
UNLISTED = "2011_000999"
LIST = osp.join("ImageSets", "Segmentation", "test.txt")


def test_palette_is_the_devkit_colour_map():
    palette = np.asarray(voc_palette(), np.uint8).reshape(256, 3)
    assert palette[:21].tolist() == PascalVOCDataset.METAINFO["palette"]
    assert palette[255].tolist() == [224, 224, 192]  # the devkit's void colour
    assert len({tuple(c) for c in palette}) == 256


def sample(image_id: str, pred: np.ndarray, label: np.ndarray | None = None) -> dict:
    out = dict(
        img_path=f"/data/JPEGImages/{image_id}.jpg",
        ori_shape=pred.shape,
        pred_sem_seg=dict(data=torch.from_numpy(pred)[None]),
    )
    if label is not None:
        out["gt_sem_seg"] = dict(data=torch.from_numpy(label)[None])
    return out


def metric(tmp_path, **kwargs) -> VOCSubmissionMetric:
    m = VOCSubmissionMetric(output_dir=str(tmp_path / "sub"), **kwargs)
    m.dataset_meta = PascalVOCDataset.METAINFO
    return m


def test_writer_writes_indexed_pngs_and_packs_only_the_listed_ids(tmp_path):
    rng = np.random.default_rng(0)
    preds = {i: rng.integers(0, 21, size).astype(np.int64) for i, size in SIZES.items()}
    writer = metric(tmp_path)
    folder = tmp_path / "sub" / COMP6
    os.makedirs(folder)
    (folder / "stale_from_an_earlier_run.png").write_bytes(b"x")
    for image_id, pred in preds.items():
        writer.process(None, [sample(image_id, pred)])
    assert writer.compute_metrics(writer.results) == {}  # format_only: nothing to evaluate
    for image_id, pred in preds.items():
        png = Image.open(folder / f"{image_id}.png")
        assert png.mode == "P" and png.getpalette() == voc_palette()
        np.testing.assert_array_equal(np.asarray(png), pred)
    with tarfile.open(tmp_path / "sub" / "results.tar.gz") as tar:
        names = tar.getnames()
        assert names == [f"{COMP6}/{i}.png" for i in SIZES]  # not the stale file
        data = tar.extractfile(names[1]).read()
    assert data == (folder / f"{list(SIZES)[1]}.png").read_bytes()
    assert not [f for f in os.listdir(folder) if ".part" in f]


def test_with_labels_it_also_evaluates_like_iou_metric(tmp_path):
    from mmseg.evaluation import IoUMetric

    rng = np.random.default_rng(1)
    samples = []
    for image_id, size in SIZES.items():
        label = rng.integers(0, 21, size)
        label[0, :3] = 255
        pred = np.where(rng.random(size) < 0.6, label % 21, rng.integers(0, 21, size))
        samples.append(sample(image_id, pred, label))
    ours, reference = metric(tmp_path, format_only=False, archive=None), IoUMetric()
    reference.dataset_meta = PascalVOCDataset.METAINFO
    ours.process(None, samples)
    reference.process(None, samples)
    expected = reference.compute_metrics(reference.results)
    assert expected["mIoU"] > 0
    assert ours.compute_metrics(ours.results) == expected
    assert not osp.exists(tmp_path / "sub" / "results.tar.gz")  # archive=None


def test_a_prediction_not_at_the_original_size_is_refused(tmp_path):
    wrong = sample("2008_000001", np.zeros((8, 9), np.int64))
    wrong["ori_shape"] = (37, 45)
    with pytest.raises(ValueError, match=r"not the image's size \(37, 45\)"):
        metric(tmp_path).process(None, [wrong])


def test_a_missing_prediction_stops_the_packing(tmp_path):
    writer = metric(tmp_path)
    writer.process(None, [sample("2008_000001", np.zeros((3, 5), np.int64))])
    os.remove(tmp_path / "sub" / COMP6 / "2008_000001.png")
    with pytest.raises(FileNotFoundError, match="2008_000001.png is missing"):
        writer.compute_metrics(writer.results)


def test_output_dir_is_required():
    with pytest.raises(ValueError, match="needs output_dir"):
        VOCSubmissionMetric()


def write_fake_test_split(root: str) -> str:
    """VOC2012/JPEGImages (listed ids + one unlisted) and ImageSets/Segmentation/test.txt."""
    rng = np.random.default_rng(0)
    images = {i: rng.integers(0, 255, (*size, 3), dtype=np.uint8) for i, size in SIZES.items()}
    write_split(root, images, LIST)
    unlisted = rng.integers(0, 255, (21, 19, 3), dtype=np.uint8)
    cv2.imwrite(osp.join(root, "JPEGImages", f"{UNLISTED}.jpg"), unlisted)
    return root


@pytest.fixture(scope="module")
def submission_setup(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("voc_test")
    root = write_fake_test_split(str(tmp / "VOCdevkit" / "VOC2012"))
    # eval_seed: the NMF draws its evaluation dictionary from a fixed seed (deterministic)
    model = tiny_model(21, head=dict(ham_cfg=dict(type="NMF", R=4, eval_seed=0)))
    config = write_tiny_twin("ham_voc_test.py", str(tmp / "tiny_voc_test.py"), model)
    return dict(
        tmp=tmp, root=root, config=config, checkpoint=save_checkpoint(config, str(tmp / "t.pth"))
    )


def run_submission(setup: dict, out: str, *extra: str, out_flag: bool = False) -> str:
    """tools/test.py writing the submission to ``out``: by ``--out`` (``out_flag``, what
    docs/recipes.md shows) or by ``test_evaluator.output_dir``."""
    args = [TEST, setup["config"], setup["checkpoint"], *extra, "--work-dir", out + "_work"]
    args += ["--out", out] if out_flag else []
    args += ["--cfg-options", f"test_dataloader.dataset.data_root={setup['root']}"]
    args += [] if out_flag else [f"test_evaluator.output_dir={out}"]
    result = run_tool(args, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def check_submission(out: str, log: str) -> dict[str, np.ndarray]:
    """Everything the server needs; returns the predictions by id."""
    archive = osp.join(out, "results.tar.gz")
    assert f"VOC submission archive: {osp.abspath(archive)}" in log
    folder = osp.join(out, COMP6)
    assert sorted(os.listdir(folder)) == sorted(f"{i}.png" for i in SIZES)  # not UNLISTED
    preds = {}
    for image_id, (h, w) in SIZES.items():
        png = Image.open(osp.join(folder, f"{image_id}.png"))
        assert png.mode == "P" and png.getpalette() == voc_palette()
        assert png.size == (w, h)  # PIL: (width, height)
        preds[image_id] = np.asarray(png)
        assert preds[image_id].min() >= 0 and preds[image_id].max() < 21
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == [f"{COMP6}/{i}.png" for i in SIZES]
        assert all(m.isfile() for m in members)
        for member in members:
            image_id = osp.splitext(osp.basename(member.name))[0]
            packed = np.asarray(Image.open(tar.extractfile(member)))
            np.testing.assert_array_equal(packed, preds[image_id])
    return preds


def test_submission_end_to_end_single_scale(submission_setup):
    from mmseg.apis import inference_model, init_model

    out = str(submission_setup["tmp"] / "single")
    preds = check_submission(out, run_submission(submission_setup, out, out_flag=True))
    # the PNGs are the model's predictions at the original size
    cfg = Config.fromfile(submission_setup["config"])
    model = init_model(cfg, submission_setup["checkpoint"], device="cpu")
    for image_id in SIZES:
        path = osp.join(submission_setup["root"], "JPEGImages", f"{image_id}.jpg")
        expected = inference_model(model, path).pred_sem_seg.data[0].numpy()
        np.testing.assert_array_equal(preds[image_id], expected)
    assert len({p.tobytes() for p in preds.values()}) == len(SIZES)


@pytest.mark.slow
def test_submission_distributed_two_processes(submission_setup):
    """2 gloo ranks: 3 images, so the sampler pads rank 1 with a duplicate of the first."""
    import subprocess
    import sys

    from tests.conftest import REPO

    out = str(submission_setup["tmp"] / "dist")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd = [*torchrun, TEST, submission_setup["config"], submission_setup["checkpoint"], "--tta"]
    cmd += ["--launcher", "pytorch", "--work-dir", out + "_work", "--cfg-options"]
    cmd += [f"test_dataloader.dataset.data_root={submission_setup['root']}"]
    cmd += [f"test_evaluator.output_dir={out}"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    # cwd: mmengine collects the ranks' results through ./.dist_test
    cwd = submission_setup["tmp"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stdout + result.stderr
    assert log.count("VOC submission archive:") == 1  # rank 0 packs, once
    check_submission(out, log)
