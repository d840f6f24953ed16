"""--cfg-options (hamseg.cli.options): every key checked against the config and the classes it
builds (a leading + adds a new key), top-level variables set as if edited in the file,
data_root= and max_iters= moving what used them, the schedule warning."""

import os.path as osp

import pytest
from mmengine.config import Config

from hamseg.cli import build_config
from hamseg.cli.options import accepted_keys, apply_config_variables, check_key
from hamseg.cli.preflight import check_schedule
from hamseg.utils.errors import UsageError
from tests.conftest import REPO, TINY_FCN
from tests.helpers import DEMO_NMF, TRAIN, run_tool_here

CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
CLASSES_CHILD = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom-classes.py")


@pytest.mark.parametrize(
    "key,expected",
    [
        ("max_iter", "tiny_fcn.py has no key 'max_iter'; did you mean max_iters? a new key"),
        ("crop_size", "tiny_fcn.py has no key 'crop_size'; did you mean crop? a new key is"),
        ("model.decode_head.num_clases", "in model.decode_head; did you mean model.decode_h"),
        ("param_scheduler.1.end", "no key '1' in param_scheduler; did you mean param_sched"),
        ("train_dataloader.dataset.img_sufix", "did you mean train_dataloader.dataset.img_s"),
    ],
)
def test_an_unknown_key_is_one_line_naming_the_nearest(key, expected, monkeypatch, capsys):
    with pytest.raises(UsageError) as err:
        check_key(Config.fromfile(TINY_FCN), key)
    assert expected in str(err.value) and f"+{key}=VALUE" in str(err.value)
    code, _, stderr = run_tool_here(
        TRAIN, [TINY_FCN, "--cfg-options", f"{key}=3"], monkeypatch, capsys
    )
    assert code == 2 and stderr.strip().splitlines()[-1].startswith(f"error: --cfg-options {key}:")


def test_keys_the_built_classes_take_are_known():
    cfg = Config.fromfile(DEMO_NMF)
    for key in (
        "model.decode_head.ham_cfg.eta",  # NMF(**kwargs) -> MatrixDecomposition2D(eta=...)
        "model.decode_head.dropout_ratio",  # HamHead(**kwargs) -> BaseDecodeHead
        "optim_wrapper.optimizer.fused",  # torch's SGD
        "train_dataloader.persistent_workers",  # no type: torch's DataLoader
        "auto_scale_lr",  # the top level: mmengine's Runner
        "compile",
        "train_dataloader.dataset.pipeline.0.backend_args",
        "model.test_cfg.crop_size",  # mmseg's slide-inference idiom: EncoderDecoder reads them
        "model.test_cfg.stride",
    ):
        check_key(cfg, key)
    assert {"eta", "R", "train_steps", "coef_init"} <= accepted_keys("NMF")
    assert "beta" in accepted_keys("CD") and "beta" not in accepted_keys("NMF")
    assert accepted_keys("NoSuchType") is None and accepted_keys(None) == set()


def test_a_plus_adds_a_new_key_and_data_root_moves_every_dataset(tmp_path):
    cfg = build_config(TINY_FCN, {"+custom_key": 1, "data_root": "/data/mine"}, work_dir="w")
    assert cfg.custom_key == 1 and "+custom_key" not in cfg
    roots = [cfg[f"{s}_dataloader"].dataset.data_root for s in ("train", "val", "test")]
    assert roots == ["/data/mine"] * 3
    other = tmp_path / "other.py"
    other.write_text('data_root = "a"\ntrain_dataloader = dict(dataset=dict(data_root="b"))\n')
    with pytest.raises(UsageError, match="no dataset of this config uses its data_root variable"):
        build_config(str(other), {"data_root": "/data/mine"})


def test_one_knob_moves_loop_schedule_and_intervals():
    cfg = build_config(CUSTOM, {"max_iters": 30})
    assert cfg.train_cfg.max_iters == cfg.train_cfg.val_interval == 30
    assert [s["end"] for s in cfg.param_scheduler] == [20, 30]  # the warm-up keeps its length
    assert cfg.default_hooks.checkpoint.interval == 30 and check_schedule(cfg) is None
    short = build_config(CUSTOM, {"max_iters": 2})  # shorter than the warm-up: a tenth of it
    assert [(s["begin"], s["end"]) for s in short.param_scheduler] == [(0, 1), (0, 2)]
    tiny = build_config(TINY_FCN, {"max_iters": 7})  # no max_iters variable: train_cfg's
    assert tiny.train_cfg.max_iters == tiny.param_scheduler[0]["end"] == 7
    assert tiny.train_cfg.val_interval == 1000 and tiny.default_hooks.checkpoint.interval == 5


def test_a_schedule_ending_off_the_loop_trains_as_written_with_one_warning():
    for options in ({"param_scheduler.1.end": 300}, {"train_cfg.max_iters": 30}):
        line = check_schedule(build_config(CUSTOM, options))
        assert "the last param_scheduler ends at iteration" in line, options
    assert "ends at iteration 500, train_cfg.max_iters=30" in line
    ocrnet = build_config("mmseg::ocrnet/ocrnet_r101-d8_8xb2-80k_cityscapes-512x1024.py")
    assert "ends at iteration 40000, train_cfg.max_iters=80000" in check_schedule(ocrnet)


BASE = """\
img_dir, ann_dir = "img_dir", "ann_dir"  # two at once
suffix: str = ".png"
classes = ("a", "b")
num_classes = len(classes)
dataset = dict(img=img_dir + "/train", ann=f"{ann_dir}/train", suffix=suffix, n=num_classes)
"""


def test_variables_act_as_if_edited_in_every_file_of_the_chain(tmp_path):
    (tmp_path / "base.py").write_text(BASE)
    child = tmp_path / "child.py"
    child.write_text(
        '_base_ = ["./base.py"]\nclasses = ("a", "b", "c")\n'
        "loader = dict(dataset={{_base_.dataset}}, classes=classes)\n"
    )
    cfg = Config.fromfile(str(child))
    options = {"ann_dir": "masks", "suffix": "_mask.png", "classes": ["x", "y", "z", "w"]}
    assert sorted(apply_config_variables(cfg, options)) == ["dataset", "loader", "num_classes"]
    expected = dict(img="img_dir/train", ann="masks/train", suffix="_mask.png", n=4)
    assert cfg.dataset == expected and cfg.loader.dataset == expected
    assert cfg.num_classes == 4 and cfg.img_dir == "img_dir"


@pytest.mark.parametrize(
    "source,line",
    [("a = b = 1\n", 1), ("a = 1\na += 1\n", 2), ("a, b = f()\n", 1), ("if 1:\n    a = 2\n", 2)],
)
def test_a_form_that_cannot_be_replaced_is_refused_naming_the_line(tmp_path, source, line):
    path = tmp_path / "my.py"
    path.write_text(source + "a = 1\n" * (source.startswith("if") or "f()" in source))
    with pytest.raises(UsageError, match=f"--cfg-options a=...: {path} line {line} sets a"):
        apply_config_variables(
            Config.fromfile(str(path))
            if "f()" not in source
            else Config(dict(a=1), filename=str(path)),
            {"a": 5},
        )


def test_the_custom_template_reads_layout_and_classes_from_the_command_line():
    options = dict(img_dir="images", ann_dir="masks", seg_map_suffix="_mask.png", split_dir="s")
    cfg = build_config(CUSTOM, options)
    for split in ("train", "val", "test"):
        dataset = cfg[f"{split}_dataloader"].dataset
        assert dataset.data_prefix == dict(img_path="images", seg_map_path="masks")
        assert dataset.seg_map_suffix == "_mask.png"
    assert cfg.train_dataloader.dataset.ann_file == "s/train.txt"
    classes, palette = ["bg", "a", "b", "c", "d"], [[i, i, i] for i in range(5)]
    cfg = build_config(CLASSES_CHILD, {"classes": classes, "palette": palette})
    assert cfg.model.decode_head.num_classes == 5
    assert list(cfg.test_dataloader.dataset.metainfo.classes) == classes
