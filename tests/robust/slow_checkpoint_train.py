"""tools/train.py with slow checkpoint writes, so that a test can SIGKILL it mid-write.

Every checkpoint whose temporary file name contains ``$HAMSEG_SLOW_SAVE`` is serialised in
memory, then written in 20 chunks 0.25 s apart; ``WRITING <path>`` goes to stderr when the first
chunk is on disk. Everything else is tools/train.py unchanged (same arguments).
"""

import io
import os
import os.path as osp
import runpy
import sys
import time

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, REPO)

import torch  # noqa: E402

_save = torch.save
_match = os.environ.get("HAMSEG_SLOW_SAVE", "")


def slow_save(obj, f, *args, **kwargs):
    name = getattr(f, "name", "")
    if not (_match and isinstance(name, str) and _match in name):
        return _save(obj, f, *args, **kwargs)
    buffer = io.BytesIO()
    _save(obj, buffer, *args, **kwargs)
    data = buffer.getvalue()
    step = len(data) // 20 + 1
    for start in range(0, len(data), step):
        f.write(data[start : start + step])
        f.flush()
        if start == 0:
            print(f"WRITING {name}", file=sys.stderr, flush=True)
        time.sleep(0.25)


torch.save = slow_save
sys.argv = [osp.join(REPO, "tools", "train.py"), *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
