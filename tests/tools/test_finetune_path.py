"""The path a new user walks with their own data (issue [finetune]), with real files and real
tool subprocesses: a checkpoint of another class count, bad labels stopped before iteration 1,
a file gone bad after the scan, the template's child configs on a `_mask.png` layout, --tta,
--show-dir."""

from __future__ import annotations

import glob
import os
import os.path as osp
import re
import shlex
import subprocess
import sys

import cv2
import numpy as np
import pytest

from tests.conftest import REPO
from tests.helpers import make_checkpoint

CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
CHILDREN = [
    osp.join(REPO, "configs", "custom", f"hamhead-nmf_r18-d8_custom-{n}.py")
    for n in ("512x512", "2k", "classes")
]
CLASSES_CHILD = CHILDREN[2]
TIMEOUT = 600


def write_sample(root: str, image: str, label_path: str, h: int, w: int, rng, bad: int = 0) -> None:
    """An odd-sized 3-class image (a colour per class, noise) and its label map; ``bad``: a
    label value written into the top-left pixel."""
    label = np.zeros((h, w), np.uint8)
    label[4:18, 5:20] = 1
    label[h - 15 : h - 3, w - 16 : w - 2] = 2
    img = np.array([[90, 90, 90], [40, 40, 220], [220, 90, 40]])[label] + rng.integers(
        -20, 20, (h, w, 3)
    )
    for path in (image, label_path):
        os.makedirs(osp.dirname(osp.join(root, path)), exist_ok=True)
    cv2.imwrite(osp.join(root, image), img.clip(0, 255).astype(np.uint8))
    label[0, 0] = bad or label[0, 0]
    cv2.imwrite(osp.join(root, label_path), label)


def write_mask_layout(
    root: str, bad_label: bool = False, drop_label: bool = False, bad_value: int = 7
) -> str:
    """A user's own layout: images/{train,val}/NAME.jpg, masks/{train,val}/NAME_mask.png, odd
    sizes, 3 classes. ``bad_label`` writes ``bad_value`` into one val and one train mask;
    ``drop_label`` deletes one val mask."""
    rng = np.random.default_rng(0)
    for split, n in (("train", 4), ("val", 3)):
        for i in range(n):
            paths = (f"images/{split}/{i:03d}.jpg", f"masks/{split}/{i:03d}_mask.png")
            write_sample(
                root, *paths, 41 + 4 * i, 47 + 2 * i, rng, bad_value * (bad_label and i == 1)
            )
    if drop_label:
        os.remove(osp.join(root, "masks", "val", "002_mask.png"))
    return root


SPLIT_FILES = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom-splitfiles.py")


def write_flat_layout(root: str) -> str:
    """A flat layout: images/NAME.jpg, masks/NAME_mask.png, splits/{train,val}.txt listing the
    names (4 train, 3 val, interleaved), odd sizes, 3 classes."""
    os.makedirs(osp.join(root, "splits"))
    rng = np.random.default_rng(1)
    names = {"train": [], "val": []}
    for i in range(7):
        name = f"field_{i:02d}"
        write_sample(
            root, f"images/{name}.jpg", f"masks/{name}_mask.png", 39 + 4 * i, 45 + 2 * i, rng
        )
        names["val" if i % 2 else "train"].append(name)
    for split, listed in names.items():
        with open(osp.join(root, "splits", f"{split}.txt"), "w") as f:
            f.write("\n".join(listed) + "\n")
    return root


def layout_options(root: str, workers: int = 1) -> list[str]:
    """--cfg-options for the layout above: data_root (moves every split), folders, suffix."""
    opts = [f"data_root={root}", "load_from=None", "default_hooks.visualization.draw=False"]
    loaders = (("train", "train_dataloader"), ("val", "val_dataloader"), ("val", "test_dataloader"))
    for split, loader in loaders:
        opts += [
            f"{loader}.dataset.data_prefix.img_path=images/{split}",
            f"{loader}.dataset.data_prefix.seg_map_path=masks/{split}",
            f"{loader}.dataset.seg_map_suffix=_mask.png",
            f"{loader}.num_workers={workers}",
            f"{loader}.persistent_workers=False",
        ]
    return opts


def run(*args: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The process failed with exit code 2 and exactly one stderr line starting 'error: '."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return errors[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[str, str]:
    """(data root, checkpoint): the template trained 2 iterations on the `_mask.png` layout."""
    tmp = tmp_path_factory.mktemp("finetune")
    root = write_mask_layout(str(tmp / "data"))
    work = str(tmp / "work")
    opts = layout_options(root, workers=0) + [
        "train_cfg.max_iters=2",
        "param_scheduler.1.end=2",
        "train_dataloader.batch_size=2",
    ]
    proc = run("tools/train.py", CUSTOM, "--work-dir", work, "--cfg-options", *opts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, osp.join(work, "iter_2.pth")


@pytest.mark.parametrize("tta", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_checkpoint_of_another_class_count_stops_test_with_one_line(tmp_path, tta):
    root = write_mask_layout(str(tmp_path / "data"))
    ckpt = make_checkpoint(str(tmp_path / "seven.pth"))  # the demo's 7 classes
    args = ["tools/test.py", CUSTOM, ckpt, "--work-dir", str(tmp_path / "w")]
    proc = run(*args, *(["--tta"] if tta else []), "--cfg-options", *layout_options(root, 0))
    line = one_line_error(proc)
    assert "decode_head.conv_seg.weight is (7, 128, 1, 1) in the checkpoint" in line
    assert "the checkpoint has 7 classes, the config has 3" in line
    assert "per class results" not in proc.stdout + proc.stderr  # nothing was evaluated


@pytest.mark.parametrize("tool", ["train", "test"])
def test_a_bad_label_stops_before_iteration_1_naming_the_file(tmp_path, tool):
    root = write_mask_layout(str(tmp_path / "data"), bad_label=True, drop_label=True)
    opts = layout_options(root, workers=1)
    if tool == "train":
        args = ["tools/train.py", CUSTOM, "--work-dir", str(tmp_path / "w")]
    else:
        ckpt = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
        args = ["tools/test.py", CUSTOM, ckpt, "--work-dir", str(tmp_path / "w")]
    proc = run(*args, "--cfg-options", *opts)
    line = one_line_error(proc)
    assert "bad sample(s) before the first iteration" in line, line
    assert "masks/val/001_mask.png" in proc.stderr and "[7] are outside [0, 3)" in proc.stderr
    assert "masks/val/002_mask.png': No such file" in proc.stderr
    assert "Iter(" not in proc.stdout


@pytest.mark.slow  # a training run that meets the bad file: ~20 s
def test_a_file_gone_bad_after_the_scan_is_one_line_naming_it_and_the_validate_command(tmp_path):
    """--skip-data-check (or a file broken after the scan): mmcv's own error in a DataLoader
    worker names the file; the line adds the command that lists every bad file, with the run's
    --cfg-options."""
    root = write_mask_layout(str(tmp_path / "data"), drop_label=True)
    ckpt = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
    args = ["tools/test.py", CUSTOM, ckpt, "--work-dir", str(tmp_path / "w"), "--skip-data-check"]
    opts = [*layout_options(root, workers=1), "test_cfg.type=TestLoop"]
    line = one_line_error(run(*args, "--cfg-options", *opts))
    assert "masks/val/002_mask.png" in line and "DataLoader worker" not in line, line
    again = shlex.join(["python", "tools/validate_dataset.py", CUSTOM, "--cfg-options", *opts])
    assert line.endswith(f"; list every bad file at once: {again}"), line


@pytest.mark.slow
def test_classes_child_config_sets_the_class_count_of_head_data_and_label_check(tmp_path):
    """The class-count child: 4 classes in the head, the metainfo (per-class results) and the
    data scan (a 4 is outside [0, 4))."""
    ckpt = make_checkpoint(str(tmp_path / "four.pth"), num_classes=4)
    root = write_mask_layout(str(tmp_path / "data"))
    args = ["tools/test.py", CLASSES_CHILD, ckpt, "--work-dir", str(tmp_path / "w")]
    proc = run(*args, "--cfg-options", *layout_options(root, workers=0))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = re.findall(r"^\|\s*(\w+)\s*\|\s*([\d.]+|nan)\s*\|", proc.stdout, re.M)
    assert [name for name, _ in rows] == ["background", "cat", "dog", "bird"], proc.stdout[-2000:]
    bad = write_mask_layout(str(tmp_path / "bad"), bad_label=True, bad_value=4)
    proc = run(*args, "--cfg-options", *layout_options(bad, workers=0))
    assert "bad sample(s) before the first iteration" in one_line_error(proc)
    assert "masks/val/001_mask.png" in proc.stderr and "outside [0, 4)" in proc.stderr


def test_a_wrong_data_root_points_to_the_custom_dataset_docs(tmp_path):
    args = ["tools/train.py", CUSTOM, "--work-dir", str(tmp_path / "w")]
    opts = [f"data_root={tmp_path}/nowhere", "load_from=None"]
    line = one_line_error(run(*args, "--cfg-options", *opts))
    assert f"{tmp_path}/nowhere" in line and "docs/custom_dataset.md" in line, line


@pytest.mark.slow
def test_finetuned_template_model_with_tta_and_show_dir(trained, tmp_path):
    root, ckpt = trained
    show = str(tmp_path / "show")
    args = ["tools/test.py", CUSTOM, ckpt, "--work-dir", str(tmp_path / "w"), "--tta"]
    proc = run(*args, "--show-dir", show, "--cfg-options", *layout_options(root, 0))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "per class results" in proc.stdout + proc.stderr
    painted = glob.glob(osp.join(show, "**", "*.png"), recursive=True)
    assert len(painted) == 3, painted  # every val image, not every 10th
    where = osp.join(show, "vis_data", "vis_image")  # logged, and where they are
    log = proc.stdout + proc.stderr
    assert f"--show-dir: painted images (ground truth | prediction) in {where}" in log
    assert sorted(painted) == sorted(glob.glob(osp.join(where, "*.png")))


@pytest.mark.slow
@pytest.mark.parametrize("child", CHILDREN, ids=osp.basename)
def test_documented_child_configs_train_on_a_mask_suffix_layout(trained, tmp_path, child):
    root, _ = trained
    opts = layout_options(root, workers=0) + [
        "train_cfg.max_iters=2",
        "train_cfg.val_interval=2",
        "param_scheduler.1.end=2",
        "train_dataloader.batch_size=2",
    ]
    if child.endswith("512x512.py"):  # a smaller crop keeps the test fast; same pipeline
        opts += [
            "train_dataloader.dataset.pipeline.2.scale=(256,96)",
            "train_dataloader.dataset.pipeline.3.crop_size=(96,96)",
            "val_dataloader.dataset.pipeline.1.scale=(256,96)",
            "model.data_preprocessor.size=(96,96)",
        ]
    proc = run("tools/train.py", child, "--work-dir", str(tmp_path / "w"), "--cfg-options", *opts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert osp.isfile(osp.join(tmp_path, "w", "iter_2.pth"))
    assert "per class results" in proc.stdout + proc.stderr


def test_split_file_child_config_reads_the_listed_names_of_a_flat_layout(tmp_path):
    """The documented split-file child on the flat layout: each split is exactly the names of
    its split file, with the `_mask.png` label next to each image, and the data is clean."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    from hamseg.cli import build_config
    from hamseg.datasets.checks import validate_splits

    root = write_flat_layout(str(tmp_path / "data"))
    opts = {"data_root": root, "load_from": None}
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        opts[f"{loader}.dataset.seg_map_suffix"] = "_mask.png"
    cfg = build_config(SPLIT_FILES, opts, work_dir=str(tmp_path / "w"))
    init_default_scope("mmseg")
    for split, loader, names in (
        ("train", "train_dataloader", ["field_00", "field_02", "field_04", "field_06"]),
        ("val", "val_dataloader", ["field_01", "field_03", "field_05"]),
        ("val", "test_dataloader", ["field_01", "field_03", "field_05"]),
    ):
        dataset = DATASETS.build(dict(cfg[loader].dataset, pipeline=[]))
        infos = [dataset.get_data_info(i) for i in range(len(dataset))]
        assert [info["img_path"] for info in infos] == [
            osp.join(root, "images", f"{n}.jpg") for n in names
        ], split
        assert [info["seg_map_path"] for info in infos] == [
            osp.join(root, "masks", f"{n}_mask.png") for n in names
        ], split
    summaries = [r.summary() for r in validate_splits(cfg, progress=False)]
    assert summaries == [
        "no problems in 4 train samples",
        "no problems in 3 val samples",
        "test: the val samples (checked above)",
    ]


SEGNEXT = osp.join(REPO, "configs", "custom", "segnext_mscan-t_custom.py")


@pytest.mark.slow
def test_segnext_template_finetunes_from_a_demo_segnext_checkpoint(trained, tmp_path):
    """The SegNeXt-T template on the same layout: from a 7-class SegNeXt-T checkpoint, the
    classifier is re-initialised (one line), training and evaluation run, --tta runs."""
    root, _ = trained
    demo = make_checkpoint(
        str(tmp_path / "segnext7.pth"),
        osp.join(REPO, "configs", "demo", "hamlighthead-nmf_mscan-t_context-shapes.py"),
    )
    work = str(tmp_path / "w")
    opts = layout_options(root, workers=0) + [
        f"load_from={demo}",
        "train_cfg.max_iters=2",
        "train_cfg.val_interval=2",
        "param_scheduler.1.end=2",
        "train_dataloader.batch_size=2",
    ]
    proc = run("tools/train.py", SEGNEXT, "--work-dir", work, "--cfg-options", *opts)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    # mmengine's loader skips the 7-class classifier (fresh init) and says so
    assert "size mismatch for decode_head.conv_seg.weight: copying a param with shape " in log
    assert "torch.Size([7, " in log and "the shape in current model is torch.Size([3, " in log
    args = ["tools/test.py", SEGNEXT, osp.join(work, "iter_2.pth"), "--tta"]
    proc = run(*args, "--work-dir", work, "--cfg-options", *layout_options(root, 0))
    assert proc.returncode == 0 and "per class results" in proc.stdout + proc.stderr


def test_the_template_itself_takes_the_flat_layout_with_split_dir(tmp_path):
    """One copy of the template, its EDIT lines set for the flat layout (issue 26: it needed a
    copy plus a child config, with the folder names in two places)."""
    from hamseg.cli import build_config
    from hamseg.datasets.checks import validate_splits

    root = write_flat_layout(str(tmp_path / "data"))
    text = open(CUSTOM).read()
    for old, new in [
        ('data_root = "data/my_dataset"', f"data_root = {root!r}"),
        ('seg_map_suffix = ".png"', 'seg_map_suffix = "_mask.png"'),
        ('img_dir, ann_dir = "img_dir", "ann_dir"', 'img_dir, ann_dir = "images", "masks"'),
        ("split_dir = None", 'split_dir = "splits"'),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    copy = tmp_path / "my_dataset.py"
    copy.write_text(text.replace('_base_ = ["../demo/', f'_base_ = ["{REPO}/configs/demo/'))
    cfg = build_config(str(copy), {"load_from": None}, work_dir=str(tmp_path / "w"))
    assert cfg.train_dataloader.dataset.ann_file == "splits/train.txt"
    assert cfg.test_dataloader.dataset.data_prefix == dict(img_path="images", seg_map_path="masks")
    summaries = [r.summary() for r in validate_splits(cfg, progress=False)]
    assert summaries[:2] == ["no problems in 4 train samples", "no problems in 3 val samples"]


def test_a_missing_demo_checkpoint_says_which_command_writes_it(tmp_path, monkeypatch):
    """The template starts from the demo's checkpoint: a new user who has not run the demo is
    told the command that writes it."""
    from hamseg.cli import CLIError, build_config
    from hamseg.cli.resume import apply_resume

    monkeypatch.chdir(tmp_path)  # no work_dirs/demo here
    cfg = build_config(CUSTOM, work_dir=str(tmp_path / "w"))
    with pytest.raises(CLIError) as err:
        apply_resume(cfg, None)
    assert str(err.value).startswith(
        "load_from checkpoint not found: work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/"
        f"iter_500.pth, relative to {tmp_path} (`python tools/run_demo.py --config "
        "configs/demo/hamhead-nmf_r18-d8_context-shapes.py` writes it, or set "
        "another with --cfg-options load_from=PATH)"
    )
    cfg = build_config(CUSTOM.replace("hamhead-nmf_r18-d8_custom", "segnext_mscan-t_custom"))
    with pytest.raises(CLIError, match="`python tools/run_demo.py --config configs/demo/hamlight"):
        apply_resume(cfg, None)
