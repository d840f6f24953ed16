"""Run per-file work over many files, in worker processes, with a progress bar.

Shared by the dataset checks (:mod:`hamseg.datasets.checks`) and the dataset converters
(:mod:`hamseg.datasets.converters`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from multiprocessing import get_all_start_methods, get_context
from typing import TypeVar

from tqdm import tqdm

__all__ = ["map_with_progress"]

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
    """``[work(item) for item in items]``, in ``workers`` processes when ``workers > 1`` (forked
    where the platform can), in order, with a tqdm bar on stderr.

    The bar is closed before an error of ``work`` propagates, so a tool's one-line error is the
    last line the user sees, not followed by the bar's last state. ``work`` and the items must
    pickle for ``workers > 1``; an error keeps its type if it is built from its message alone.
    """
    done: list[R] = []
    with tqdm(total=len(items), desc=desc, unit=unit, disable=not progress) as bar:
        if workers > 1:
            method = "fork" if "fork" in get_all_start_methods() else "spawn"
            with get_context(method).Pool(workers) as pool:
                for result in pool.imap(work, items, chunksize=chunksize):
                    done.append(result)
                    bar.update()
        else:
            for item in items:
                done.append(work(item))
                bar.update()
    return done
