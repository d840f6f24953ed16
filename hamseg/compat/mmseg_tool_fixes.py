"""Fixes for bugs of mmseg 1.2.2's own tool scripts (mmengine 0.10.7, OpenCV 4), patched only
while one runs under ``tools/mmseg_tool.py`` (:mod:`hamseg.cli.mmseg_tool`), then restored:

- get_flops.py: ``input_shape`` and ``inputs`` "cannot be both set": ``inputs`` is used;
- browse_dataset.py: "Layout of the output array img is incompatible with cv::Mat": the image
  is made contiguous;
- benchmark.py prints ``nan`` on a test set under 200 images: the loader repeats;
- confusion_matrix.py, misc/browse_dataset.py read the class's ``METAINFO`` (``KeyError:
  'classes'``, a wrong size for a subset): each dataset gets its instance's metainfo;
- ``--cfg-options data_root=PATH`` moves the datasets too (``merge_cfg_options``);
- publish_model.py exits before its ``mv`` has run: started processes are waited for.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import mmengine.analysis as analysis
import numpy as np
from mmengine.config import Config
from mmengine.runner import Runner
from mmseg.registry import DATASETS
from mmseg.visualization import SegLocalVisualizer

from hamseg.utils.config import merge_cfg_options

_ABSENT = object()


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name = value`` inside, restored after (raw: a staticmethod stays one; an
    attribute the object did not have is deleted again)."""
    original = vars(owner).get(name, _ABSENT)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if original is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def _get_flops_inputs_only() -> contextlib.AbstractContextManager:
    count = analysis.get_model_complexity_info

    def get_model_complexity_info(model, input_shape=None, inputs=None, **kwargs):
        input_shape = None if inputs is not None else input_shape  # inputs is what it means
        return count(model, input_shape=input_shape, inputs=inputs, **kwargs)

    return _patched(analysis, "get_model_complexity_info", get_model_complexity_info)


def _contiguous_images() -> contextlib.AbstractContextManager:
    add = SegLocalVisualizer.add_datasample

    def add_datasample(self, name, image, *args, **kwargs):
        return add(self, name, np.ascontiguousarray(image), *args, **kwargs)

    return _patched(SegLocalVisualizer, "add_datasample", add_datasample)


def _instance_metainfo() -> contextlib.AbstractContextManager:
    build = DATASETS.build

    def build_dataset(cfg, *args, **kwargs):
        dataset = build(cfg, *args, **kwargs)
        if isinstance(getattr(dataset, "metainfo", None), dict):
            dataset.METAINFO = dataset.metainfo  # hides the class attribute the scripts read
        return dataset

    return _patched(DATASETS, "build", build_dataset)


def _data_root_moves_datasets() -> contextlib.AbstractContextManager:
    merge = Config.merge_from_dict

    def merge_from_dict(self, options, allow_list_keys=True):
        merge_cfg_options(self, options, merge, allow_list_keys)

    return _patched(Config, "merge_from_dict", merge_from_dict)


class RepeatedLoader:
    """Iterate over ``loader`` again and again (an empty one: not at all)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Any]:
        while True:
            empty = True
            for batch in self.loader:
                empty = False
                yield batch
            if empty:
                return

    def __getattr__(self, name: str) -> Any:  # dataset, batch_size, ... of the wrapped loader
        return getattr(self.loader, name)


def _repeated_test_loader() -> contextlib.AbstractContextManager:
    build = Runner.build_dataloader
    return _patched(
        Runner, "build_dataloader", staticmethod(lambda *a, **k: RepeatedLoader(build(*a, **k)))
    )


@contextlib.contextmanager
def _wait_for_started_processes() -> Iterator[None]:
    started: list[subprocess.Popen] = []

    class Popen(subprocess.Popen):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    try:
        with _patched(subprocess, "Popen", Popen):
            yield
    finally:
        for process in started:
            process.wait()


#: Script (relative to mmseg's tools folder) -> the fixes applied while it runs.
FIXES: dict[str, tuple[Callable[[], contextlib.AbstractContextManager], ...]] = {
    "analysis_tools/get_flops.py": (_get_flops_inputs_only, _data_root_moves_datasets),
    "analysis_tools/browse_dataset.py": (_contiguous_images, _data_root_moves_datasets),
    "analysis_tools/benchmark.py": (_repeated_test_loader,),
    "analysis_tools/confusion_matrix.py": (_instance_metainfo, _data_root_moves_datasets),
    "misc/browse_dataset.py": (_instance_metainfo, _contiguous_images, _data_root_moves_datasets),
    "misc/print_config.py": (_data_root_moves_datasets,),
    "misc/publish_model.py": (_wait_for_started_processes,),
}


@contextlib.contextmanager
def tool_fixes(script: str) -> Iterator[None]:
    """Apply the fixes for ``script`` (relative to mmseg's tools folder) inside the block."""
    with contextlib.ExitStack() as stack:
        for fix in FIXES.get(script, ()):
            stack.enter_context(fix())
        yield
