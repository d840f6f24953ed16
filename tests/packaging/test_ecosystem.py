"""docs/ecosystem.md with the wheel in a fresh venv (the shared packages through a path file,
openmim 0.3.9 from PyPI), away from the repository: mmengine's hub, ``list_models``, ``mim
train/test/run hamseg`` (mmseg's tool names too), the startup line."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import time

import pytest

from tests.packaging.test_wheel import build, run

CONFIG = "demo/hamhead-nmf_r18-d8_context-shapes.py"

USER = """
import hamseg
from mmengine.hub import get_model
from mmseg.apis import MMSegInferencer
from hamseg.apis import init_model, inference_model, show_result_pyplot, MMSegInferencer as Ours
from hamseg.apis.inference import resolve_model_name
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes

print(hamseg.__file__)
print(type(get_model("hamseg::{config}").decode_head).__name__)
names = MMSegInferencer.list_models("hamseg")
print(min(map(len, names)), all(resolve_model_name(n) for n in names), "ham_voc" in names)
options = ContextShapesConfig(size=64, num_train=4, num_val=3)
generate_context_shapes("data/context_shapes", options, progress=False)
"""


@pytest.mark.slow
def test_wheel_with_mmengine_hub_mim_and_apis(tmp_path):
    _, wheel = build(tmp_path)
    venv, cwd = tmp_path / "venv", tmp_path / "user"
    run([sys.executable, "-m", "venv", str(venv)])
    (own,) = venv.glob("lib/python*/site-packages")
    shared = [p for p in site.getsitepackages() if os.path.isdir(p)]
    (own / "shared.pth").write_text("\n".join(shared) + "\n")
    python, mim = str(venv / "bin" / "python"), str(venv / "bin" / "mim")
    # --ignore-installed: the shared site-packages' editable hamseg must not count as installed
    run([python, "-m", "pip", "install", "--no-deps", "--ignore-installed", str(wheel)])
    pip_mim = [python, "-m", "pip", "install", "-q", "openmim==0.3.9"]
    if subprocess.run(pip_mim, capture_output=True, timeout=600).returncode:
        pytest.skip("openmim 0.3.9 does not install here (no PyPI)")
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    out = run([python, "-c", USER.format(config=CONFIG)], cwd=cwd, env=env).stdout
    lines = [line for line in out.splitlines() if line and "model_name: " not in line]
    assert lines[-3].startswith(str(own)) and lines[-2] == "HamHead", lines  # the installed copy
    shortest, resolve, alias = lines[-1].split()
    assert int(shortest) > 1 and resolve == alias == "True"  # no single letters

    name = CONFIG.split("/")[1]
    train = run(
        [mim, "train", "hamseg", name, "--work-dir", "work", "--cfg-options"]
        + ["max_iters=2"],  # the one schedule knob: loop, scheduler end, intervals
        cwd=cwd,
        env=env,
    )
    assert f"{own}/hamseg/.mim/tools/train.py" in train.stdout
    assert (cwd / "work" / "iter_2.pth").is_file()
    test = [mim, "test", "hamseg", name, "--checkpoint", "work/iter_2.pth", "--work-dir", "work"]
    assert f"{own}/hamseg/.mim/tools/test.py" in run(test, cwd=cwd, env=env).stdout
    flops = [mim, "run", "hamseg", "get_flops", f"hamseg::{CONFIG}", "--shape", "33", "41"]
    flops = run(flops, cwd=cwd, env=env)
    assert "hamseg/.mim/tools/analysis_tools/get_flops.py" in flops.stdout  # mmseg's place
    assert "Input shape: (33, 41)" in flops.stdout and "Flops:" in flops.stdout
    demo = [mim, "run", "hamseg", "run_demo", "--max-iters", "2", "--no-vis", "--work-dir", "demo"]
    out = run(demo, cwd=cwd, env=env).stdout  # issue 40: from the wheel (mim adds a last line)
    assert "\nHamHead-NMF demo: val mIoU = " in out, out[-1000:]
    tool = [mim, "run", "hamseg", "mmseg_tool", "print_config", f"hamseg::{CONFIG}"]
    assert "type='HamHead'" in run(tool, cwd=cwd, env=env).stdout
    named = run([mim, "run", "hamseg", "print_config", f"hamseg::{CONFIG}"], cwd=cwd, env=env)
    assert "hamseg/.mim/tools/misc/print_config.py" in named.stdout  # mmseg's tool names
    assert "type='HamHead'" in named.stdout
    publish = [mim, "run", "hamseg", "publish_model", "work/iter_2.pth", "work/demo_pub.pth"]
    assert "hamseg/.mim/tools/misc/publish_model.py" in run(publish, cwd=cwd, env=env).stdout
    for _ in range(100):  # mmseg's script does not wait for its `mv`
        if list((cwd / "work").glob("demo_pub-*.pth")):
            break
        time.sleep(0.1)
    assert len(list((cwd / "work").glob("demo_pub-*.pth"))) == 1

    # the opt-in startup line (docs/ecosystem.md): plain `import mmseg.apis` imports hamseg first
    (own / "hamseg-startup.pth").write_text("import hamseg\n")
    plain = "import mmseg.apis, sys; print('hamseg' in sys.modules)"
    assert run([python, "-c", plain], cwd=cwd, env=env).stdout.split()[-1] == "True"
