"""Minimal fixes for bugs of mmseg 1.2.2's own tool scripts, applied only while one of them runs.

``python tools/mmseg_tool.py TOOL ...`` (:mod:`hamseg.cli.mmseg_tool`) runs mmseg's scripts
unchanged; these context managers patch, for the duration of the run, exactly the call that each
script gets wrong on this stack, and restore it afterwards:

- ``analysis_tools/get_flops.py`` passes both ``input_shape`` and ``inputs`` to mmengine's
  ``get_model_complexity_info``, which mmengine 0.10.7 refuses ("input_shape" and "inputs" cannot
  be both set). As upstream mmseg later does, ``inputs`` (the preprocessed random image) is used.
- ``analysis_tools/browse_dataset.py`` hands the visualizer a non-contiguous view of the image
  (a permuted tensor with its channels reversed); with class names drawn (the default),
  OpenCV refuses to draw into the ``np.zeros_like`` copy ("Layout of the output array img is
  incompatible with cv::Mat"). The image is made contiguous first.
- ``analysis_tools/benchmark.py`` averages the speed of test images 6 to 200 and prints ``nan``
  when the test set has fewer than 200 (the demo's has 100). The test loader is repeated until the
  script stops at 200.
- ``analysis_tools/confusion_matrix.py`` reads the classes from the dataset's class attribute
  (``dataset.METAINFO['classes']``, for the matrix size and the axis labels), which is empty for
  mmseg's generic ``BaseSegDataset`` whose classes the config gives in ``metainfo`` (the custom
  template's): ``KeyError: 'classes'``. For a dataset class with its own classes, a config that
  keeps a subset of them would get a matrix of the wrong size. Every dataset the script builds
  gets its instance's ``metainfo`` (classes, palette, ...) as its ``METAINFO``.
- The scripts that take ``--cfg-options`` (get_flops, browse_dataset, confusion_matrix,
  print_config) merge ``data_root=PATH`` into the config's top-level variable alone, whose
  value every dataset copied when the file was read: the override silently changed nothing.
  As in hamseg's own tools (:func:`hamseg.utils.config.merge_cfg_options`), every dataset that used
  the variable moves with it.
- ``misc/publish_model.py`` renames its output with ``subprocess.Popen(['mv', ...])`` and exits
  without waiting, so the published file may not exist yet when the command returns. Started
  processes are waited for.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from hamseg.utils.config import merge_cfg_options

__all__ = ["FIXES", "RepeatedLoader", "instance_metainfo", "tool_fixes"]


_ABSENT = object()


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """Set ``owner.name = value`` (a class's, a module's or an object's own attribute) and restore
    it (an object's attribute it did not have is deleted again)."""
    original = vars(owner).get(name, _ABSENT)  # raw: keeps a staticmethod a staticmethod
    setattr(owner, name, value)
    try:
        yield
    finally:
        if original is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def _get_flops_inputs_only() -> contextlib.AbstractContextManager:
    import mmengine.analysis as analysis

    count = analysis.get_model_complexity_info

    def get_model_complexity_info(model, input_shape=None, inputs=None, **kwargs):
        if inputs is not None:
            input_shape = None  # get_flops.py sets both; inputs is what it means
        return count(model, input_shape=input_shape, inputs=inputs, **kwargs)

    return _patched(analysis, "get_model_complexity_info", get_model_complexity_info)


def _contiguous_images_for_the_visualizer() -> contextlib.AbstractContextManager:
    from mmseg.visualization import SegLocalVisualizer

    add = SegLocalVisualizer.add_datasample

    def add_datasample(self, name, image, *args, **kwargs):
        return add(self, name, np.ascontiguousarray(image), *args, **kwargs)

    return _patched(SegLocalVisualizer, "add_datasample", add_datasample)


def instance_metainfo(dataset: Any) -> Any:
    """Give ``dataset`` its instance's ``metainfo`` as ``METAINFO`` (an object attribute, which
    hides the class attribute that scripts read); returns ``dataset``."""
    metainfo = getattr(dataset, "metainfo", None)
    if isinstance(metainfo, dict):
        dataset.METAINFO = metainfo
    return dataset


def _datasets_with_instance_metainfo() -> contextlib.AbstractContextManager:
    from mmseg.registry import DATASETS

    build = DATASETS.build

    def build_dataset(cfg, *args, **kwargs):
        return instance_metainfo(build(cfg, *args, **kwargs))

    return _patched(DATASETS, "build", build_dataset)


def _data_root_moves_its_datasets() -> contextlib.AbstractContextManager:
    from mmengine.config import Config

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
    from mmengine.runner import Runner

    build = Runner.build_dataloader

    def build_dataloader(*args, **kwargs):
        return RepeatedLoader(build(*args, **kwargs))

    return _patched(Runner, "build_dataloader", staticmethod(build_dataloader))


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
    "analysis_tools/get_flops.py": (_get_flops_inputs_only, _data_root_moves_its_datasets),
    "analysis_tools/browse_dataset.py": (
        _contiguous_images_for_the_visualizer,
        _data_root_moves_its_datasets,
    ),
    "analysis_tools/benchmark.py": (_repeated_test_loader,),
    "analysis_tools/confusion_matrix.py": (
        _datasets_with_instance_metainfo,
        _data_root_moves_its_datasets,
    ),
    "misc/browse_dataset.py": (
        _datasets_with_instance_metainfo,
        _contiguous_images_for_the_visualizer,
        _data_root_moves_its_datasets,
    ),
    "misc/print_config.py": (_data_root_moves_its_datasets,),
    "misc/publish_model.py": (_wait_for_started_processes,),
}


@contextlib.contextmanager
def tool_fixes(script: str) -> Iterator[None]:
    """Apply the fixes for ``script`` (relative to mmseg's tools folder) inside the block."""
    with contextlib.ExitStack() as stack:
        for fix in FIXES.get(script, ()):
            stack.enter_context(fix())
        yield
