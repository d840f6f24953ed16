"""tools/dataset_converters/converters.py (VOC trainaug, PASCAL Context) and its tools on tiny
synthetic releases.

The tools are run with the exact command lines that hamseg.datasets.checks prints for a missing
dataset, from a temporary working directory that holds a miniature ``data/`` tree; the other
tests call the package with the same arguments.
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import json
import os
import os.path as osp
import shlex
import subprocess
import sys

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.datasets import PascalContextDataset59
from mmseg.registry import DATASETS
from PIL import Image
from scipy.io import savemat

from hamseg.datasets.checks import prepare_commands
from tools.dataset_converters import converters
from tools.dataset_converters.converters import build_trainaug, convert_pascal_context
from hamseg.evaluation import voc_palette
from tests.conftest import REPO

#: The commands the dataset checks print for the default folders, and their arguments.
PREPARE_VOC_AUG = prepare_commands()["voc_aug"]
PREPARE_CONTEXT = prepare_commands()["pascal_context"]
VOC_AUG_ARGS = shlex.split(PREPARE_VOC_AUG)[2:]
CONTEXT_ARGS = shlex.split(PREPARE_CONTEXT)[2:]


def run_command(command: str, tool: str) -> subprocess.CompletedProcess:
    """Run ``python tools/dataset_converters/<tool>.py ARGS`` in the working directory."""
    words = shlex.split(command)
    assert words[:2] == ["python", f"tools/dataset_converters/{tool}.py"]
    cmd = [sys.executable, osp.join(REPO, words[1]), *words[2:]]
    return subprocess.run(cmd, cwd=os.getcwd(), capture_output=True, text=True, timeout=600)


def write_lines(path: str, lines: list[str]) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(line + "\n" for line in lines)


def write_jpg(path: str, h: int, w: int, rng) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)


# --------------------------------------------------------------------------------------------
# VOC trainaug
# --------------------------------------------------------------------------------------------
@pytest.fixture()
def voc_tree(tmp_path, monkeypatch):
    """data/VOCdevkit/VOC2012 (train a b c, val d e) and data/VOCdevkit/VOCaug (SBD: a b d x y)."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    voc = "data/VOCdevkit/VOC2012"
    write_lines(f"{voc}/ImageSets/Segmentation/train.txt", ["a", "b", "c"])
    write_lines(f"{voc}/ImageSets/Segmentation/val.txt", ["d", "e"])
    sbd = "data/VOCdevkit/VOCaug/dataset"
    write_lines(f"{sbd}/train.txt", ["a", "x", "d"])
    write_lines(f"{sbd}/val.txt", ["b", "y"])
    os.makedirs(f"{sbd}/cls")
    maps = {}
    for i, image_id in enumerate(["a", "b", "d", "x", "y"]):
        h, w = 20 + i, 31 - i
        maps[image_id] = rng.integers(0, 21, (h, w)).astype(np.uint8)
        boundaries = np.zeros((h, w), np.uint8)
        savemat(
            f"{sbd}/cls/{image_id}.mat",
            {
                "GTcls": {
                    "Segmentation": maps[image_id],
                    "Boundaries": boundaries,
                    "CategoriesPresent": np.unique(maps[image_id]),
                }
            },
        )
        write_jpg(f"{voc}/JPEGImages/{image_id}.jpg", h, w, rng)
    for image_id in ["c", "e"]:
        write_jpg(f"{voc}/JPEGImages/{image_id}.jpg", 24, 24, rng)
    os.makedirs(f"{voc}/SegmentationClass")
    for image_id, h, w in [("a", 20, 31), ("b", 21, 30), ("c", 24, 24)]:  # official VOC labels
        label = rng.integers(0, 21, (h, w)).astype(np.uint8)
        Image.fromarray(label).save(f"{voc}/SegmentationClass/{image_id}.png")
    return maps


def test_voc_aug_with_the_checks_command(voc_tree):
    out = run_command(PREPARE_VOC_AUG, "voc_aug")
    assert out.returncode == 0, out.stderr[-3000:]
    voc = "data/VOCdevkit/VOC2012"
    for image_id, expected in voc_tree.items():
        png = np.array(Image.open(f"{voc}/SegmentationClassAug/{image_id}.png"))
        assert png.dtype == np.uint8 and np.array_equal(png, expected), image_id
    sets = f"{voc}/ImageSets/Segmentation"
    assert open(f"{sets}/aug.txt").read().split() == ["x", "y"]  # SBD minus VOC train/val
    assert open(f"{sets}/trainaug.txt").read().split() == ["a", "b", "c", "x", "y"]
    assert "aug.txt: 2 images, trainaug.txt: 5 images" in out.stdout
    assert "10582" in out.stderr  # the real data's size is stated
    assert "SBD .mat -> PNG" in out.stderr  # tqdm progress bar


def test_voc_trainaug_loads_with_the_recipe_pipeline(voc_tree):
    res = build_trainaug(*VOC_AUG_ARGS)
    assert (res.converted, res.aug, res.voc_train) == (5, ["x", "y"], 3)
    init_default_scope("mmseg")
    cfg = Config.fromfile(osp.join(REPO, "configs", "ham_voc.py"))
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    assert len(dataset) == 5  # VOC train a b c + aug x y = trainaug
    sample = dataset[4]  # "y", from SegmentationClassAug
    label = sample["data_samples"].gt_sem_seg.data
    assert sample["inputs"].shape[-2:] == label.shape[-2:]
    assert set(label.unique().tolist()) <= set(range(21))


def test_voc_aug_missing_sbd_says_where_to_get_it(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="benchmark.tgz"):
        build_trainaug(str(tmp_path / "VOCdevkit"), str(tmp_path / "nope"))
    monkeypatch.chdir(tmp_path)  # the tool: the same message as one line, exit code 2
    out = run_command(PREPARE_VOC_AUG, "voc_aug")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith(
        "error: SBD class maps not found: data/VOCdevkit/VOCaug/dataset/cls."
    )


def last_line_error(out: subprocess.CompletedProcess) -> str:
    """The tool's error: exit code 2, no traceback, the last stderr line (tqdm's bar precedes)."""
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return out.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("nproc", ["1", "2"])
def test_voc_aug_names_a_corrupt_mat_in_one_line(voc_tree, nproc):
    mat = "data/VOCdevkit/VOCaug/dataset/cls/x.mat"
    with open(mat, "r+b") as f:  # truncated
        f.truncate(120)
    out = run_command(f"{PREPARE_VOC_AUG} --nproc {nproc}", "voc_aug")
    error = last_line_error(out)
    assert error.startswith(f"error: SBD class map '{mat}' cannot be read (")
    assert error.endswith("extract it again from the release")
    savemat(mat, {"Other": np.zeros((2, 3))})  # a MATLAB file of something else
    error = last_line_error(run_command(f"{PREPARE_VOC_AUG} --nproc {nproc}", "voc_aug"))
    assert error == f"error: SBD class map '{mat}' holds no 'GTcls' variable"


@pytest.fixture()
def release_tree(voc_tree):
    """voc_tree plus VOC 2012 val labels for d and e (d is in SBD too) with VOC's 255 border band,
    and trainval.txt: the VOC trainval labels are a b c d e, SBD's a b d x y."""
    voc = "data/VOCdevkit/VOC2012"
    write_lines(f"{voc}/ImageSets/Segmentation/trainval.txt", ["a", "b", "c", "d", "e"])
    rng = np.random.default_rng(1)
    for image_id, (h, w) in (("d", (22, 29)), ("e", (24, 24))):
        label = rng.integers(0, 21, (h, w)).astype(np.uint8)
        label[:, 5] = 255  # VOC's "void" band at object borders
        image = Image.fromarray(label, mode="P")
        image.putpalette(voc_palette())
        image.save(f"{voc}/SegmentationClass/{image_id}.png")
    return {i: np.array(Image.open(f"{voc}/SegmentationClass/{i}.png")) for i in "abcde"}


def test_voc_labels_mode_writes_the_release_union_and_voc_wins(voc_tree, release_tree):
    """SBD's 5 maps + VOC's 5 trainval labels, 3 images in both: 7 labels (the real data: 11,355
    + 2,913 - 2,237 = 12,031); where both have the image, the PNG is VOC's label."""
    out = run_command(f"{PREPARE_VOC_AUG} --voc-labels", "voc_aug")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "7 PNGs in data/VOCdevkit/VOC2012/SegmentationClassAug" in out.stdout
    assert "SBD 5 + VOC trainval 5 labels, 3 images in both: VOC's label kept." in out.stdout
    assert "12031 labels; got 7" in out.stderr
    folder = "data/VOCdevkit/VOC2012/SegmentationClassAug"
    assert sorted(os.listdir(folder)) == [f"{i}.png" for i in "abcdexy"]
    for image_id in "abcdexy":
        png = Image.open(f"{folder}/{image_id}.png")
        expected = release_tree.get(image_id, voc_tree.get(image_id))
        assert png.mode == "L" and np.array_equal(np.array(png), expected), image_id
    assert not np.array_equal(release_tree["a"], voc_tree["a"])  # the overlap rule decided
    res = build_trainaug(*VOC_AUG_ARGS, voc_labels=True)  # the same through the package
    assert (res.converted, res.voc_written, res.overlap, res.labels) == (
        5,
        list("abcde"),
        list("abd"),
        7,
    )
    assert res.trainaug == ["a", "b", "c", "x", "y"]  # the lists do not change


def stage2_release_labels() -> Config:
    """configs/ham_voc_trainval.py with the documented switch to the release's labels."""
    from hamseg.cli import build_config

    option = {"train_dataloader.dataset.data_prefix.seg_map_path": "SegmentationClassAug"}
    return build_config(osp.join(REPO, "configs", "ham_voc_trainval.py"), option)


def test_stage2_switch_needs_the_voc_labels_mode(voc_tree, release_tree):
    """Without --voc-labels SegmentationClassAug lacks the VOC-only images (c, e): the switch's
    data scan lists them; with it every trainval label loads, equal to VOC's official one."""
    from hamseg.datasets.checks import validate_splits

    build_trainaug(*VOC_AUG_ARGS)
    (report,) = validate_splits(stage2_release_labels(), ("train",), progress=False)
    assert report.num_samples == 5 and len(report.problems) == 2
    assert all("does not exist" in p for p in report.problems)
    build_trainaug(*VOC_AUG_ARGS, voc_labels=True)
    (report,) = validate_splits(stage2_release_labels(), ("train",), progress=False)
    assert report.problems == []
    init_default_scope("mmseg")
    dataset = DATASETS.build(stage2_release_labels().train_dataloader.dataset)
    official = Config.fromfile(osp.join(REPO, "configs", "ham_voc_trainval.py"))
    default = DATASETS.build(official.train_dataloader.dataset)
    for index in range(len(dataset)):
        label = dataset.get_data_info(index)["seg_map_path"]
        assert label.endswith(".png") and "SegmentationClassAug" in label
        release = np.array(Image.open(label))
        assert np.array_equal(
            release, np.array(Image.open(default.get_data_info(index)["seg_map_path"]))
        )


def test_voc_labels_mode_refuses_an_rgb_label_in_one_line(voc_tree, release_tree):
    path = "data/VOCdevkit/VOC2012/SegmentationClass/e.png"
    Image.fromarray(np.zeros((24, 24, 3), np.uint8)).save(path)
    error = last_line_error(run_command(f"{PREPARE_VOC_AUG} --voc-labels", "voc_aug"))
    assert error.startswith(
        f"error: VOC label '{path}' is a 'RGB'-mode image: VOC 2012's SegmentationClass"
    )


# --------------------------------------------------------------------------------------------
# PASCAL Context
# --------------------------------------------------------------------------------------------
def test_context_class_table_matches_mmseg():
    ids = [i for i, _ in converters.CONTEXT59]
    assert ids == sorted(ids) and len(set(ids)) == 59 and ids[0] == 2 and ids[-1] == 458
    assert [n for _, n in converters.CONTEXT59] == list(PascalContextDataset59.METAINFO["classes"])
    lut = converters.lookup_table()
    assert lut[2] == 1 and lut[458] == 59 and lut[284] == 37  # aeroplane, wood, person
    assert lut[0] == lut[1] == lut[459] == 0 and int((lut > 0).sum()) == 59


@pytest.fixture()
def context_tree(tmp_path, monkeypatch):
    """data/VOCdevkit/VOC2010 with trainval/<id>.mat label maps and the Main train/val split."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    root = "data/VOCdevkit/VOC2010"
    os.makedirs(f"{root}/trainval")
    maps = {}
    for i, image_id in enumerate(["2008_000002", "2008_000003", "2009_000001", "2010_000004"]):
        h, w = 17 + i, 23
        values = np.array([0, 1, 2, 9, 284, 458, 459, 100])  # 1 (accordion), 100: not in the 59
        maps[image_id] = values[rng.integers(0, len(values), (h, w))].astype(np.uint16)
        savemat(f"{root}/trainval/{image_id}.mat", {"LabelMap": maps[image_id]})
        write_jpg(f"{root}/JPEGImages/{image_id}.jpg", h, w, rng)
    write_lines(f"{root}/ImageSets/Main/train.txt", ["2008_000002", "2009_000001"])
    write_lines(f"{root}/ImageSets/Main/val.txt", ["2008_000003", "2010_000004", "2010_999999"])
    return maps


def expected_context60(label_map: np.ndarray) -> np.ndarray:
    mapping = {0: 0, 1: 0, 2: 1, 9: 2, 284: 37, 458: 59, 459: 0, 100: 0}
    return np.vectorize(mapping.get)(label_map).astype(np.uint8)


def test_context_with_the_checks_command(context_tree):
    out = run_command(PREPARE_CONTEXT, "pascal_context")  # the json does not exist
    assert out.returncode == 0, out.stderr[-3000:]
    root = "data/VOCdevkit/VOC2010"
    for image_id, label_map in context_tree.items():
        png = np.array(Image.open(f"{root}/SegmentationClassContext/{image_id}.png"))
        assert np.array_equal(png, expected_context60(label_map)), image_id
    sets = f"{root}/ImageSets/SegmentationContext"
    assert open(f"{sets}/train.txt").read().split() == ["2008_000002", "2009_000001"]
    assert open(f"{sets}/val.txt").read().split() == ["2008_000003", "2010_000004"]
    err = out.stderr
    assert "4 PNGs in data/VOCdevkit/VOC2010/SegmentationClassContext; train 2, val 2" in out.stdout
    assert "1 val images" in err and "2010_999999" in err  # listed, not silently dropped
    assert "Context .mat -> PNG" in err

    init_default_scope("mmseg")
    for config, classes in (("ham_context_60.py", 60), ("ham_context.py", 59)):
        cfg = Config.fromfile(osp.join(REPO, "configs", config))
        dataset = DATASETS.build(cfg.val_dataloader.dataset)
        assert len(dataset) == 2 and len(dataset.metainfo["classes"]) == classes
        label = dataset[0]["data_samples"].gt_sem_seg.data  # 2008_000003
        expected = expected_context60(context_tree["2008_000003"]).astype(np.int64)
        if classes == 59:  # background ignored, classes shifted down
            expected = np.where(expected == 0, 255, expected - 1)
        assert np.array_equal(label[0].numpy(), expected), config


def test_context_split_from_the_json(context_tree):
    root = "data/VOCdevkit/VOC2010"
    images = [
        {"file_name": "2008_000002.jpg", "phase": "val"},
        {"file_name": "2008_000003.jpg", "phase": "train"},
        {"file_name": "2009_000001.jpg", "phase": "train"},
    ]
    with open(f"{root}/trainval_merged.json", "w") as f:
        json.dump({"images": images, "annos_segmentation": []}, f)
    res = convert_pascal_context(*CONTEXT_ARGS)
    assert res.source == f"{root}/trainval_merged.json" and res.missing == dict(train=[], val=[])
    sets = f"{root}/ImageSets/SegmentationContext"
    assert open(f"{sets}/train.txt").read().split() == ["2008_000003", "2009_000001"]
    assert open(f"{sets}/val.txt").read().split() == ["2008_000002"]


def test_context_labels_txt_is_checked(context_tree):
    root = "data/VOCdevkit/VOC2010"
    names = {i: f"label{i}" for i in range(1, 460)}
    names.update(dict(converters.CONTEXT59))
    names[427] = "tv monitor"  # spaces and case are ignored
    write_lines(f"{root}/labels.txt", [f"{i}: {n}" for i, n in sorted(names.items())])
    assert convert_pascal_context(*CONTEXT_ARGS).labels_checked == f"{root}/labels.txt"
    names[9] = "bagpipe"
    write_lines(f"{root}/labels.txt", [f"{i}: {n}" for i, n in sorted(names.items())])
    with pytest.raises(ValueError, match="9: expected 'bag', labels.txt has 'bagpipe'"):
        convert_pascal_context(*CONTEXT_ARGS)
    assert convert_pascal_context(*CONTEXT_ARGS, label_check=False).labels_checked is None


def test_context_missing_mats_say_what_to_download(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="trainval.tar.gz"):
        convert_pascal_context(*CONTEXT_ARGS)


def test_context_rejects_out_of_range_ids():
    with pytest.raises(ValueError, match="0..459"):
        converters.to_context60(np.array([[460]]), converters.lookup_table())


def test_context_names_a_corrupt_or_out_of_range_mat_in_one_line(context_tree):
    mat = "data/VOCdevkit/VOC2010/trainval/2009_000001.mat"
    savemat(mat, {"LabelMap": np.full((3, 4), 460, np.uint16)})
    error = last_line_error(run_command(PREPARE_CONTEXT, "pascal_context"))
    assert error == (
        f"error: PASCAL Context label map '{mat}': LabelMap values must be in 0..459, got 460..460"
    )
    with open(mat, "wb") as f:
        f.write(b"not a MATLAB file")
    error = last_line_error(run_command(f"{PREPARE_CONTEXT} --nproc 2", "pascal_context"))
    assert error.startswith(f"error: PASCAL Context label map '{mat}' cannot be read (")
