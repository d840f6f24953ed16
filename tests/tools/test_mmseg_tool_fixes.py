"""tools/lib/mmseg_tool_fixes.py: each fix works inside its block and is undone after it."""

from __future__ import annotations

import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import hamseg  # noqa: F401  (before mmseg)
from tests.conftest import REPO
from tools.lib.mmseg_tool_fixes import FIXES, RepeatedLoader, tool_fixes

CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")


def test_get_flops_fix_counts_the_inputs_and_is_undone():
    import mmengine.analysis as analysis

    model = nn.Conv2d(3, 5, 3, bias=False)  # 3*3*3 MACs per output element and channel
    x = torch.rand(1, 3, 9, 11)
    with pytest.raises(ValueError, match="cannot be both set"):
        analysis.get_model_complexity_info(model, (3, 9, 11), inputs=x, show_table=False)
    with tool_fixes("analysis_tools/get_flops.py"):
        # the shape is ignored in favour of the real inputs, as get_flops.py means it
        info = analysis.get_model_complexity_info(model, (3, 99, 99), inputs=x, show_table=False)
    assert info["flops"] == 27 * 5 * 7 * 9
    with pytest.raises(ValueError, match="cannot be both set"):
        analysis.get_model_complexity_info(model, (3, 9, 11), inputs=x, show_table=False)


def test_browse_dataset_fix_draws_non_contiguous_images():
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    from mmseg.visualization import SegLocalVisualizer

    original = SegLocalVisualizer.add_datasample
    vis = SegLocalVisualizer(name="fix_test", alpha=0.5)
    vis.dataset_meta = dict(classes=("a", "b"), palette=[[0, 0, 0], [255, 0, 0]])
    label = torch.zeros(1, 31, 37, dtype=torch.long)
    label[0, 5:20, 5:25] = 1
    sample = SegDataSample(gt_sem_seg=PixelData(data=label))
    chw = torch.randint(0, 255, (3, 31, 37), dtype=torch.uint8)
    image = chw.permute(1, 2, 0).numpy()[..., [2, 1, 0]]  # what browse_dataset.py passes
    assert not image.flags.c_contiguous
    with tool_fixes("analysis_tools/browse_dataset.py"):
        vis.add_datasample("x", image, sample, draw_pred=False, show=False)
    drawn = vis.get_image()
    assert SegLocalVisualizer.add_datasample is original
    vis.add_datasample("x", np.ascontiguousarray(image), sample, draw_pred=False, show=False)
    reference = vis.get_image()
    assert drawn.shape == (31, 37, 3) and np.array_equal(drawn, reference)
    assert not np.array_equal(drawn, image)  # labels and class names were drawn


def test_repeated_loader_runs_until_the_consumer_stops():
    taken = []
    for i, batch in enumerate(RepeatedLoader([10, 11, 12])):
        taken.append(batch)
        if i + 1 == 200:
            break
    assert len(taken) == 200 and taken[:4] == [10, 11, 12, 10] and taken[-1] == 10 + 199 % 3
    assert list(RepeatedLoader([])) == []  # an empty loader does not spin forever


def test_benchmark_fix_repeats_the_loader_and_keeps_build_dataloader_static():
    from mmengine.runner import Runner

    raw = vars(Runner)["build_dataloader"]
    loader = dict(
        batch_size=1, dataset=list(range(3)), sampler=dict(type="DefaultSampler", shuffle=False)
    )
    with tool_fixes("analysis_tools/benchmark.py"):
        built = Runner.build_dataloader(loader)
        assert isinstance(built, RepeatedLoader) and len(built.dataset) == 3
        first = [int(batch[0]) for batch, _ in zip(built, range(7))]  # pseudo_collate: lists
    assert first == [0, 1, 2, 0, 1, 2, 0]
    assert vars(Runner)["build_dataloader"] is raw and isinstance(raw, staticmethod)


def test_publish_fix_waits_for_started_processes(tmp_path):
    done = tmp_path / "done"
    code = f"import time, pathlib; time.sleep(0.5); pathlib.Path({str(done)!r}).touch()"
    with tool_fixes("misc/publish_model.py"):
        subprocess.Popen([sys.executable, "-c", code])  # as publish_model.py starts `mv`
        assert not done.exists()
    assert done.exists()
    assert subprocess.Popen.__name__ == "Popen" and subprocess.Popen.__module__ == "subprocess"


@pytest.mark.parametrize("script", ["analysis_tools/confusion_matrix.py", "misc/browse_dataset.py"])
def test_metainfo_fix_gives_a_base_seg_dataset_the_config_classes(script):
    """The custom template's BaseSegDataset: its classes are the config's ``metainfo``, which
    confusion_matrix.py (and misc/browse_dataset.py) read from the empty class attribute."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.datasets import BaseSegDataset
    from mmseg.registry import DATASETS

    init_default_scope("mmseg")
    cfg = Config.fromfile(CUSTOM).test_dataloader.dataset
    cfg.lazy_init = True  # no files needed: only the metainfo is read
    assert "classes" not in DATASETS.build(cfg).METAINFO  # mmseg 1.2.2: KeyError: 'classes'
    with tool_fixes(script):
        dataset = DATASETS.build(cfg)
        assert len(dataset.METAINFO["classes"]) == 3  # what the script's matrix size is
    assert dataset.METAINFO["classes"] == ("background", "cat", "dog")
    assert dataset.METAINFO["palette"] == [[0, 0, 0], [220, 40, 40], [40, 90, 220]]
    assert BaseSegDataset.METAINFO == {} and "build" not in vars(DATASETS)  # undone
    assert "classes" not in DATASETS.build(cfg).METAINFO


def test_metainfo_fix_keeps_the_subset_of_classes_a_config_selects():
    """A dataset class with its own classes and a config that keeps two of them: the labels are
    mapped to 0..1, so the matrix must be 2 x 2 (the class attribute would make it 3 x 3)."""
    from mmseg.datasets import BaseSegDataset
    from mmseg.registry import DATASETS

    class ThreeClasses(BaseSegDataset):
        METAINFO = dict(classes=("a", "b", "c"), palette=[[1, 1, 1], [2, 2, 2], [3, 3, 3]])

    cfg = dict(type=ThreeClasses, metainfo=dict(classes=("a", "c")), lazy_init=True)
    with tool_fixes("analysis_tools/confusion_matrix.py"):
        dataset = DATASETS.build(cfg)
    assert dataset.METAINFO["classes"] == ("a", "c") and dataset.METAINFO["palette"] == [
        [1, 1, 1],
        [3, 3, 3],
    ]
    assert dataset.label_map == {0: 0, 1: 255, 2: 1}
    assert ThreeClasses.METAINFO["classes"] == ("a", "b", "c")


def test_fixes_name_real_mmseg_scripts():
    from tools.lib.mmseg_front_end import mmseg_tools_dir

    for script in FIXES:
        assert osp.isfile(osp.join(mmseg_tools_dir(), script)), script


def test_print_config_fix_writes_next_to_existing_files_and_is_undone(tmp_path, monkeypatch):
    """print_config.py's ``cfg.dump('example.py')`` and ``open('example-graph.txt', 'w')``."""
    from mmengine.config import Config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "example.py").write_text("mine = 1\n")
    (tmp_path / "example-1.py").write_text("mine = 2\n")
    (tmp_path / "example-graph.txt").write_text("my graph\n")
    cfg = Config(dict(a=1))
    with tool_fixes("misc/print_config.py") as script_globals:
        cfg.dump("example.py")
        cfg.dump("fresh.py")
        with script_globals["open"]("example-graph.txt", "w") as f:
            f.write("graph")
        with script_globals["open"]("example-graph.txt") as f:  # reading: the file itself
            assert f.read() == "my graph\n"
    assert (tmp_path / "example.py").read_text() == "mine = 1\n"
    assert (tmp_path / "example-1.py").read_text() == "mine = 2\n"
    assert Config.fromfile(str(tmp_path / "example-2.py")).a == 1
    assert Config.fromfile(str(tmp_path / "fresh.py")).a == 1
    assert (tmp_path / "example-graph.txt").read_text() == "my graph\n"
    assert (tmp_path / "example-graph-1.txt").read_text() == "graph"
    cfg.dump("example.py")  # undone: mmengine's own dump again
    assert Config.fromfile(str(tmp_path / "example.py")).a == 1
