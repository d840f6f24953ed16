"""tools/train.py whose write of one file stops half-way, so that a test can SIGKILL it there.

The file whose name contains ``$HAMSEG_SLOW_SAVE`` (opened for writing) gets its data in 20
chunks, ``WROTE k/20 <path>`` on stderr after each; after chunk 10 the process waits to be
killed. Everything else is tools/train.py unchanged (same arguments).
"""

import builtins
import os
import os.path as osp
import runpy
import sys
import threading

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, REPO)
_open, _match = builtins.open, os.environ.get("HAMSEG_SLOW_SAVE", "")


class HalfWrite:
    def __init__(self, handle, name: str) -> None:
        self.handle, self.name = handle, name

    def write(self, data: bytes) -> int:
        step = len(data) // 20 + 1
        for k, start in enumerate(range(0, len(data), step), 1):
            self.handle.write(data[start : start + step])
            self.handle.flush()
            print(f"WROTE {k}/20 {self.name}", file=sys.stderr, flush=True)
            if k == 10:
                threading.Event().wait()  # until SIGKILL
        return len(data)

    def __getattr__(self, name: str):
        return getattr(self.handle, name)

    def __enter__(self) -> "HalfWrite":
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()


def half_open(file, mode="r", *args, **kwargs):
    handle = _open(file, mode, *args, **kwargs)
    name = os.fspath(file) if isinstance(file, (str, os.PathLike)) else ""
    return HalfWrite(handle, name) if _match and "w" in mode and _match in name else handle


builtins.open = half_open
sys.argv = [osp.join(REPO, "tools", "train.py"), *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
