"""``--cfg-options NAME=VALUE`` on a config's top-level variables acts as if the line were edited
(hamseg.compat.config_variables): what the config computed from it follows, in every file of the
chain; a form that cannot be replaced is refused naming the variable, the file and the line."""

from __future__ import annotations

import os.path as osp

import pytest
from mmengine.config import Config

import hamseg  # noqa: F401  (before mmseg)
from hamseg.cli import build_config
from hamseg.compat.config_variables import apply_config_variables, assign_variables
from hamseg.utils.errors import UsageError
from tests.conftest import REPO

CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
CLASSES_CHILD = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom-classes.py")
BASE = """\
img_dir, ann_dir = "img_dir", "ann_dir"  # two at once
suffix: str = ".png"
classes = ("a", "b")
num_classes = len(classes)
dataset = dict(img=img_dir + "/train", ann=f"{ann_dir}/train", suffix=suffix, n=num_classes)
"""


@pytest.fixture
def chain(tmp_path) -> str:
    """A child config over a base that computes a dataset from its variables."""
    (tmp_path / "base.py").write_text(BASE)
    (tmp_path / "child.py").write_text(
        '_base_ = ["./base.py"]\nclasses = ("a", "b", "c")\n'
        "loader = dict(dataset={{_base_.dataset}}, classes=classes)\n"
    )
    return str(tmp_path / "child.py")


def test_variables_act_as_if_edited_in_every_file_of_the_chain(chain):
    cfg = Config.fromfile(chain)
    assert cfg.dataset == dict(img="img_dir/train", ann="ann_dir/train", suffix=".png", n=2)
    options = {"ann_dir": "masks", "suffix": "_mask.png", "classes": ["x", "y", "z", "w"]}
    followed = apply_config_variables(cfg, {**options, "dataset.n": 9})
    assert sorted(followed) == ["dataset", "loader", "num_classes"]
    expected = dict(img="img_dir/train", ann="masks/train", suffix="_mask.png", n=4)
    assert cfg.dataset == expected and cfg.loader.dataset == expected
    assert cfg.num_classes == 4 and cfg.loader.classes == ["x", "y", "z", "w"]
    assert cfg.ann_dir == "masks" and cfg.img_dir == "img_dir"


def test_build_config_merges_dotted_options_after_the_variables(chain):
    cfg = build_config(chain, {"suffix": ".tif", "dataset.n": 9, "new_key": 1})
    assert cfg.dataset.suffix == ".tif" and cfg.dataset.n == 9 and cfg.new_key == 1
    plain = build_config(chain, {"new_key": 1})  # no variable of the files: a plain merge
    assert plain.dataset.suffix == ".png" and plain.new_key == 1


@pytest.mark.parametrize(
    "source,line",
    [
        ("a = b = 1\n", 1),  # chained: b would change too
        ("a = 1\na += 1\n", 2),
        ("a, b = f()\n", 1),  # unpacked from an expression
        ("if True:\n    a = 2\n", 2),
        ("from os import sep as a\n", 1),
    ],
)
def test_a_form_that_cannot_be_replaced_is_refused_naming_it(source, line):
    with pytest.raises(UsageError) as err:
        assign_variables(source, {"a": 5}, "my.py")
    assert str(err.value).startswith(f"--cfg-options a=...: my.py line {line} sets a in a form")


def test_replacement_keeps_the_rest_of_the_file():
    source = 'x, y = 1, "é"  # note\nz = [\n    1,\n]\nw = [v for v in z]\n'
    text, assigned = assign_variables(source, {"y": "ü", "z": (2, 3), "v": 0}, "f.py")
    assert text == "x, y = 1, ('ü')  # note\nz = ((2, 3))\nw = [v for v in z]\n"
    assert assigned == {"y", "z"}  # the comprehension's v is no variable of the file


def test_the_custom_template_reads_the_layout_given_on_the_command_line():
    options = dict(img_dir="images", ann_dir="masks", seg_map_suffix="_mask.png")
    cfg = build_config(CUSTOM, {**options, "reduce_zero_label": True, "split_dir": "splits"})
    for split in ("train", "val", "test"):
        dataset = cfg[f"{split}_dataloader"].dataset
        assert dataset.data_prefix == dict(img_path="images", seg_map_path="masks")
        assert dataset.seg_map_suffix == "_mask.png" and dataset.reduce_zero_label is True
    assert cfg.train_dataloader.dataset.ann_file == "splits/train.txt"
    assert cfg.val_dataloader.dataset.ann_file == "splits/val.txt"


def test_classes_and_palette_set_the_head_and_every_dataloader():
    classes, palette = ["bg", "a", "b", "c", "d"], [[i, i, i] for i in range(5)]
    cfg = build_config(CLASSES_CHILD, {"classes": classes, "palette": palette})
    assert cfg.model.decode_head.num_classes == 5
    for split in ("train", "val", "test"):
        metainfo = cfg[f"{split}_dataloader"].dataset.metainfo
        assert list(metainfo.classes) == classes and metainfo.palette == palette
