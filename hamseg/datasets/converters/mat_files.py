"""Reading the releases' MATLAB label files (SBD ``cls/*.mat``, PASCAL Context ``trainval/*.mat``)
so that a truncated, corrupt or foreign file stops a converter with one line naming it."""

from __future__ import annotations

from typing import Any

from scipy.io import loadmat

from hamseg.datasets.samples import InvalidSampleError

__all__ = ["read_mat_field"]


def read_mat_field(path: str, field: str, what: str, **loadmat_kwargs: Any) -> Any:
    """``scipy.io.loadmat(path, **loadmat_kwargs)[field]``.

    Args:
        path: The .mat file.
        field: The variable to read (``GTcls``, ``LabelMap``).
        what: What the file is, for the message (e.g. "SBD class map").
        **loadmat_kwargs: Passed to ``loadmat``.

    Raises:
        InvalidSampleError: One line naming the file: missing, not a MATLAB file that scipy
            reads (truncated, corrupt), or without ``field``. It keeps its type across a
            ``multiprocessing.Pool`` (built from its message alone), and the tools print it as
            one line with exit code 2.
    """
    try:
        return loadmat(path, **loadmat_kwargs)[field]
    except FileNotFoundError:
        raise InvalidSampleError(f"{what} {path!r} does not exist") from None
    except KeyError:
        raise InvalidSampleError(f"{what} {path!r} holds no {field!r} variable") from None
    except Exception as err:  # scipy raises several types for a damaged file
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InvalidSampleError(
            f"{what} {path!r} cannot be read ({reason}); extract it again from the release"
        ) from None
