"""Per-file work over many files in worker processes, with a progress bar."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from multiprocessing import get_all_start_methods, get_context
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")
R = TypeVar("R")


def map_with_progress(
    work: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    desc: str,
    unit: str = "img",
    progress: bool = True,
    chunksize: int = 16,
) -> list[R]:
    """``[work(item) for item in items]`` in ``workers`` processes if > 1 (forked where possible),
    with a tqdm bar on stderr closed before an error of ``work`` propagates."""
    with tqdm(total=len(items), desc=desc, unit=unit, disable=not progress) as bar:
        with contextlib.ExitStack() as stack:
            results = map(work, items)
            if workers > 1:
                method = "fork" if "fork" in get_all_start_methods() else "spawn"
                pool = stack.enter_context(get_context(method).Pool(workers))
                results = pool.imap(work, items, chunksize=chunksize)
            done = []
            for result in results:
                done.append(result)
                bar.update()
            return done
