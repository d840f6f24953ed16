"""What a benchmark leaves behind: progress lines while it runs, its report files and plots."""

from __future__ import annotations

import json
import os
import os.path as osp
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def progress(line: str) -> None:
    """Print a progress line now (not when the output buffer fills)."""
    print(line, flush=True)


def write_report(
    base: str,
    text: str,
    result: dict[str, Any],
    plot: Optional[Callable[[dict[str, Any], str], None]] = None,
) -> list[str]:
    """Write ``base``.md (``text``), ``base``.json (``result``) and, with ``plot``, ``base``.png.

    The directory of ``base`` is created if needed. Values JSON cannot represent (a device, a
    path) are written as strings. Returns the paths written, .md, .json, .png order.
    """
    os.makedirs(osp.dirname(base) or ".", exist_ok=True)
    files = [base + ".md", base + ".json"]
    if plot is not None:
        plot(result, base + ".png")
        files.append(base + ".png")
    with open(files[0], "w") as f:
        f.write(text)
    with open(files[1], "w") as f:
        json.dump(result, f, indent=1, default=str)
    return files


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, path: str) -> None:
    """Lay out ``fig``, write it to ``path`` (PNG, 110 dpi) and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
