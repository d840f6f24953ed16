"""Fixes for bugs of mmseg 1.2.2's own tool scripts (mmengine 0.10.7, OpenCV 4), patched only
while one runs under ``tools/mmseg_tool.py`` (:mod:`.mmseg_front_end`), then restored:

- get_flops.py: ``input_shape`` and ``inputs`` "cannot be both set": ``inputs`` is used;
- browse_dataset.py: "Layout of the output array img is incompatible with cv::Mat": the image
  is made contiguous;
- benchmark.py prints ``nan`` on a test set under 200 images: the loader repeats;
- confusion_matrix.py, misc/browse_dataset.py read the class's ``METAINFO`` (``KeyError:
  'classes'``, a wrong size for a subset): each dataset gets its instance's metainfo;
- ``--cfg-options`` as in ``tools/train.py``: ``data_root=PATH`` moves the datasets too
  (``merge_cfg_options``), a template variable (``seg_map_suffix=...``) changes what the config
  computed from it (:mod:`hamseg.compat.config_variables`);
- publish_model.py exits before its ``mv`` has run: started processes are waited for;
- print_config.py writes ``example.py`` (``--graph``: ``example-graph.txt``) over any file of
  that name in the working directory: an existing file is kept, the new one goes next to it.
"""

from __future__ import annotations

import hamseg  # noqa: F401  (adapts the stack before mmengine and mmseg are imported)

# isort: split
import contextlib
import itertools
import os
import os.path as osp
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import mmengine.analysis as analysis
import numpy as np
from mmengine.config import Config
from mmengine.runner import Runner
from mmseg.registry import DATASETS
from mmseg.visualization import SegLocalVisualizer

from hamseg.compat.config_variables import apply_config_variables
from hamseg.compat.patching import patched
from hamseg.utils.config import merge_cfg_options


def _get_flops_inputs_only() -> contextlib.AbstractContextManager:
    count = analysis.get_model_complexity_info

    def get_model_complexity_info(model, input_shape=None, inputs=None, **kwargs):
        input_shape = None if inputs is not None else input_shape  # inputs is what it means
        return count(model, input_shape=input_shape, inputs=inputs, **kwargs)

    return patched(analysis, "get_model_complexity_info", get_model_complexity_info)


def _contiguous_images() -> contextlib.AbstractContextManager:
    add = SegLocalVisualizer.add_datasample

    def add_datasample(self, name, image, *args, **kwargs):
        return add(self, name, np.ascontiguousarray(image), *args, **kwargs)

    return patched(SegLocalVisualizer, "add_datasample", add_datasample)


def _instance_metainfo() -> contextlib.AbstractContextManager:
    build = DATASETS.build

    def build_dataset(cfg, *args, **kwargs):
        dataset = build(cfg, *args, **kwargs)
        if isinstance(getattr(dataset, "metainfo", None), dict):
            dataset.METAINFO = dataset.metainfo  # hides the class attribute the scripts read
        return dataset

    return patched(DATASETS, "build", build_dataset)


def _cfg_options_as_in_train() -> contextlib.AbstractContextManager:
    merge = Config.merge_from_dict

    def merge_from_dict(self, options, allow_list_keys=True):
        apply_config_variables(self, options)
        merge_cfg_options(self, options, merge, allow_list_keys)

    return patched(Config, "merge_from_dict", merge_from_dict)


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
    return patched(
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
        with patched(subprocess, "Popen", Popen):
            yield
    finally:
        for process in started:
            process.wait()


def free_name(path: str) -> str:
    """``path`` if nothing is there, else the first free ``STEM-N.EXT`` next to it."""
    stem, ext = osp.splitext(path)
    names = itertools.chain([path], (f"{stem}-{n}{ext}" for n in itertools.count(1)))
    return next(name for name in names if not osp.lexists(name))


@contextlib.contextmanager
def _keep_existing_files() -> Iterator[dict[str, Any]]:
    """``Config.dump`` and the script's own ``open`` for writing never replace a file; yields
    the script's ``open``."""
    dump = Config.dump

    def new_file(file: Any) -> Any:
        if not isinstance(file, (str, os.PathLike)) or not osp.lexists(file):
            return file
        name = free_name(os.fspath(file))
        print(f"{os.fspath(file)} exists and is kept: written to {name} instead")
        return name

    def dump_new(self, file=None):
        return dump(self, None if file is None else new_file(file))

    def open_new(file, mode="r", *args, **kwargs):
        return open(new_file(file) if "w" in mode else file, mode, *args, **kwargs)

    with patched(Config, "dump", dump_new):
        yield {"open": open_new}


#: Script (relative to mmseg's tools folder) -> the fixes applied while it runs.
FIXES: dict[str, tuple[Callable[[], contextlib.AbstractContextManager], ...]] = {
    "analysis_tools/get_flops.py": (_get_flops_inputs_only, _cfg_options_as_in_train),
    "analysis_tools/browse_dataset.py": (_contiguous_images, _cfg_options_as_in_train),
    "analysis_tools/benchmark.py": (_repeated_test_loader,),
    "analysis_tools/confusion_matrix.py": (_instance_metainfo, _cfg_options_as_in_train),
    "misc/browse_dataset.py": (_instance_metainfo, _contiguous_images, _cfg_options_as_in_train),
    "misc/print_config.py": (_cfg_options_as_in_train, _keep_existing_files),
    "misc/publish_model.py": (_wait_for_started_processes,),
}


@contextlib.contextmanager
def tool_fixes(script: str) -> Iterator[dict[str, Any]]:
    """Apply the fixes for ``script`` (relative to mmseg's tools folder) inside the block; yields
    the names the script's own globals get (``open`` for print_config.py)."""
    script_globals: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        for fix in FIXES.get(script, ()):
            script_globals.update(stack.enter_context(fix()) or {})
        yield script_globals
