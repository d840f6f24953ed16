"""Run a converter's per-file work over every file, in worker processes, with a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from multiprocessing import Pool
from typing import TypeVar

from tqdm import tqdm

__all__ = ["convert_all"]

T = TypeVar("T")
R = TypeVar("R")


def convert_all(work: Callable[[T], R], items: Sequence[T], nproc: int, desc: str) -> list[R]:
    """``[work(item) for item in items]`` in ``nproc`` processes (any order when ``nproc > 1``).

    The progress bar (stderr) is closed before an error of ``work`` propagates, so a tool's
    one-line error is the last line the user sees, not followed by the bar's last state.
    """
    done: list[R] = []
    with tqdm(total=len(items), desc=desc, unit="img") as bar:
        if nproc > 1:
            with Pool(nproc) as pool:
                for result in pool.imap_unordered(work, items, chunksize=32):
                    done.append(result)
                    bar.update()
        else:
            for item in items:
                done.append(work(item))
                bar.update()
    return done
