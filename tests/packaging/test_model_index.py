"""The model index: model-index.yml, a metafile and a README per config folder (mmseg's layout).

Names resolve to configs through mmengine's own metafile reader (what ``MMSegInferencer(name)``
uses); the numbers agree with the paper tables in docs/recipes.md, the measured demo tables in
docs/demo_results*.md and, for SegNeXt (not trained here), mmseg's LightHamHead numbers, labelled as
such; every README results table agrees with its metafile.
"""

from __future__ import annotations

import glob
import os
import os.path as osp
import re

import pytest
import yaml

import hamseg  # noqa: F401  (before mmseg)
from tests.conftest import REPO

FOLDERS = ("hamnet", "demo", "segnext")


def load_yaml(*parts: str):
    with open(osp.join(REPO, *parts), encoding="utf-8") as f:
        return yaml.safe_load(f)


def models() -> list[dict]:
    from mmengine.infer import BaseInferencer

    return list(BaseInferencer._get_models_from_metafile(REPO))


def table_rows(path: str) -> list[list[str]]:
    """Cells of every markdown table row in ``path``."""
    with open(path, encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip().startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_index_imports_one_metafile_per_config_folder():
    assert load_yaml("model-index.yml")["Import"] == [f"configs/{f}/metafile.yaml" for f in FOLDERS]
    for folder in FOLDERS:
        (collection,) = load_yaml("configs", folder, "metafile.yaml")["Collections"]
        assert collection["README"] == f"configs/{folder}/README.md"
        assert osp.isfile(osp.join(REPO, collection["README"]))


def test_names_are_unique_and_resolve_to_configs_that_load():
    """... and every indexed config imports the package only: none needs a checkout's lab code
    (tools/lab/)."""
    from mmengine.config import Config

    names = [n for m in models() for n in [m["Name"], *m.get("Alias", [])]]
    assert len(names) == len(set(n.lower() for n in names))
    for model in models():
        cfg = Config.fromfile(osp.join(REPO, model["Config"]))
        assert "decode_head" in cfg.model, model["Name"]
        imports = cfg.get("custom_imports", {}).get("imports", [])
        assert all(m.split(".")[0] == "hamseg" for m in imports), (model["Name"], imports)


def test_list_models_gives_whole_names_that_resolve():
    """mmengine extends its list with ``Alias``: a string would give its letters (issue 27)."""
    from mmseg.apis import MMSegInferencer

    from hamseg.apis.inference import resolve_model_name

    assert all(isinstance(m.get("Alias", []), list) for m in models())
    listed = MMSegInferencer.list_models("hamseg")
    assert sorted(listed) == sorted(n for m in models() for n in [m["Name"], *m.get("Alias", [])])
    assert min(map(len, listed)) > 5 and "ham_voc" in listed
    for name in listed:
        assert resolve_model_name(name)[0].endswith(".py"), name


def test_every_leaf_config_has_an_entry():
    listed = {m["Config"] for m in models()}
    for folder in FOLDERS:
        leaves = glob.glob(osp.join(REPO, "configs", folder, "**", "*.py"), recursive=True)
        for path in leaves:
            rel = osp.relpath(path, REPO).replace(osp.sep, "/")
            if "/_base_/" not in rel:
                assert rel in listed, f"{rel}: add it to configs/{folder}/metafile.yaml"


def test_short_names_are_aliases_of_their_twins():
    aliases = {a: m["Config"] for m in models() for a in m.get("Alias", []) if a.startswith("ham_")}
    assert sorted(aliases) == sorted(
        osp.basename(p)[:-3] for p in glob.glob(osp.join(REPO, "configs", "ham_*.py"))
    )
    for short, long in aliases.items():
        with open(osp.join(REPO, "configs", short + ".py"), encoding="utf-8") as f:
            assert f'_base_ = ["./{long[len("configs/") :]}"]' in f.read(), short


def test_weights_are_where_training_writes_them():
    from mmengine.config import Config

    for model in models():
        weights, cfg = model["Weights"], Config.fromfile(osp.join(REPO, model["Config"]))
        if weights.startswith("data/pretrained/"):  # the converted release (docs/recipes.md)
            continue
        stem = osp.splitext(osp.basename(model["Config"]))[0]
        folder = {"demo": "work_dirs/demo/", "ablations": "work_dirs/ablations/"}.get(
            model["Config"].split("/")[-2], "work_dirs/"
        )
        if folder == "work_dirs/ablations/":
            stem = model["Name"].removeprefix("hamnet-ablation_")
        where = cfg.get("work_dir", f"{folder}{stem}")  # a test variant names its model's folder
        assert weights == f"{where}/iter_{cfg.train_cfg.max_iters}.pth", model["Name"]


def measured_demo_metrics() -> dict[str, dict[str, float]]:
    """Config -> the metrics its metafile entry must have, from every table that
    tools/compare_demo_heads.py wrote (docs/demo_results*.md): over n seeds the median, minimum
    and maximum, over one seed ``mIoU (1 seed)``."""
    from tools.lab.analysis.head_comparison import HEADS

    heads = {h.label: h for h in HEADS.values()}  # label in the tables -> head
    measured = {}
    for path in sorted(glob.glob(osp.join(REPO, "docs", "demo_results*.md"))):
        for cells in table_rows(path):
            several = re.fullmatch(r"\*\*([\d.]+)\*\* \[([\d.]+), ([\d.]+)\]", cells[1])
            one = re.fullmatch(r"\*\*([\d.]+)\*\* \(1 seed\)", cells[1])
            if not (several or one):
                continue
            head = heads[cells[0]]  # a measured head that compare_demo_heads knows
            if head.options:  # a row of config options (BPTT, 208 channels) has no entry
                continue
            config = head.config
            assert config not in measured, f"{cells[0]} measured in two tables"
            if one:
                measured[config] = {"mIoU (1 seed)": float(one.group(1))}
                continue
            n = int(cells[3].split("/")[1])  # the 'seeds >= threshold' column: k/n
            median, low, high = (float(g) for g in several.groups())
            measured[config] = {
                f"mIoU (median, {n} seeds)": median,
                f"mIoU min ({n} seeds)": low,
                f"mIoU max ({n} seeds)": high,
            }
    return measured


def test_demo_numbers_are_the_measured_ones():
    measured = measured_demo_metrics()
    demo = [m for m in models() if m["Config"].startswith("configs/demo/")]
    for model in demo:
        if model["Config"] in measured:
            assert model["Results"]["Dataset"] == "Context Shapes", model["Name"]
            assert model["Results"]["Metrics"] == measured.pop(model["Config"]), model["Name"]
        else:
            assert "Results" not in model, f"{model['Name']}: no measured number in the docs"
    assert not measured, f"measured heads without a metafile entry: {sorted(measured)}"
    with_results = {m["Config"].split("/")[-1] for m in demo if "Results" in m}
    assert {  # the controls, the three hams and self-attention over 10 seeds
        "fcn_r18-d8_context-shapes.py",
        "psphead-gap_r18-d8_context-shapes.py",
        "hamhead-nmf_r18-d8_context-shapes.py",
        "hamhead-cd_r18-d8_context-shapes.py",
        "hamhead-vq_r18-d8_context-shapes.py",
        "nonlocal_r18-d8_context-shapes.py",
    } <= with_results


def test_demo_heads_beyond_the_r18_comparison_are_indexed():
    """The two SegNeXt-T demo heads have entries with their architecture; every entry is a
    packaged config (the lab's context heads, tools/lab/configs/, have none)."""
    demo = {m["Config"]: m for m in models() if m["Config"].startswith("configs/demo/")}
    assert not [m["Config"] for m in models() if not m["Config"].startswith("configs/")]
    for config, backbone, head in (
        ("lighthamhead_mscan-t_context-shapes.py", "MSCAN-T", "LightHamHead (mmseg)"),
        ("hamlighthead-nmf_mscan-t_context-shapes.py", "MSCAN-T", "HamLightHead (NMF)"),
    ):
        model = demo[f"configs/demo/{config}"]
        assert model["Name"] == config[:-3]
        assert model["Metadata"]["Architecture"] == [backbone, head], config


def test_segnext_numbers_are_mmsegs_lighthamhead_reference_clearly_labelled():
    """Our SegNeXt configs are not trained here: their Results are the numbers mmseg reports for
    the same recipe with its LightHamHead, under metric names that say so, equal to the
    installed mmseg's metafile."""
    import mmseg

    with open(
        osp.join(osp.dirname(mmseg.__file__), ".mim", "configs", "segnext", "metafile.yaml"),
        encoding="utf-8",
    ) as f:
        reference = {m["Name"]: m["Results"] for m in yaml.safe_load(f)["Models"]}
    ours = load_yaml("configs", "segnext", "metafile.yaml")["Models"]
    assert len(ours) == len(reference) == 4
    for model in ours:
        mmseg_model = reference[osp.basename(model["Config"])[:-3]]
        assert model["Results"]["Dataset"] == mmseg_model["Dataset"] == "ADE20K"
        assert model["Results"]["Metrics"] == {
            f"{k} (mmseg LightHamHead)": v for k, v in mmseg_model["Metrics"].items()
        }, model["Name"]


def test_ablation_numbers_are_the_papers():
    paper = {}
    for cells in table_rows(osp.join(REPO, "docs", "recipes.md")):
        hit = re.match(r"([\d.]+)\(([\d.]+)\)", cells[-1])
        if cells[0].startswith("`") and cells[0].endswith(".py`") and hit:
            paper[cells[0].strip("`")] = (float(hit.group(1)), float(hit.group(2)))
    ablations = [m for m in models() if "/ablations/" in m["Config"]]
    assert len(ablations) >= 17
    for model in ablations:
        metrics = model["Results"]["Metrics"]
        got = (metrics["mIoU(best of 5)"], metrics["mIoU(mean of 5)"])
        assert got == paper[osp.basename(model["Config"])], model["Name"]


@pytest.mark.parametrize("folder", FOLDERS)
def test_readme_tables_agree_with_the_metafile(folder):
    rows = table_rows(osp.join(REPO, "configs", folder, "README.md"))
    for model in load_yaml("configs", folder, "metafile.yaml")["Models"]:
        if "Results" not in model:
            continue
        target = model["Config"][len(f"configs/{folder}/") :]
        (row,) = [r for r in rows if any(f"]({target})" in c for c in r)]
        for metric, value in model["Results"]["Metrics"].items():
            assert str(value) in row, (model["Name"], metric, row)
        if not target.startswith("ablations/"):  # those give the weights pattern once
            assert any(model["Weights"] in c for c in row), (model["Name"], row)


def test_the_index_says_where_weights_are_and_why_results_are_missing():
    """Four HamNet models have no paper number (VOC stage 1, its ResNetV1c variant, the
    60-class Context recipe, the release-msflip Context test); the others that lack Results are
    marked not trained here."""
    hamnet = [m for m in models() if m["Config"].startswith("configs/hamnet/")]
    without = sorted(m["Name"] for m in hamnet if "Results" not in m and not not_trained_here(m))
    assert without == [
        "hamnet_r101-d8-v1c_8xb2-60k_voc12aug-513x513",
        "hamnet_r101-d8_8xb2-25k_pascal-context-513x513",
        "hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513_release-msflip",
        "hamnet_r101-d8_8xb2-60k_voc12aug-513x513",
    ]
    # every config folder explains itself; configs/custom (templates) too
    for folder in os.listdir(osp.join(REPO, "configs")):
        if osp.isdir(osp.join(REPO, "configs", folder)) and folder != "_base_":
            assert osp.isfile(osp.join(REPO, "configs", folder, "README.md")), folder


def not_trained_here(model: dict) -> bool:
    return model.get("Metadata", {}).get("Status") == "not trained here"


def test_cityscapes_and_ade20k_models_are_marked_not_trained_here():
    """mmseg's Cityscapes/ADE20K recipes with the HamNet head: no Results (no paper number, not
    trained here), said in the index and in the README's rows."""
    marked = [m for m in models() if not_trained_here(m)]
    assert sorted(m["Name"] for m in marked) == sorted(
        f"hamnet_r{d}-d8_{recipe}"
        for d in (50, 101)
        for recipe in (
            "4xb2-80k_cityscapes-512x1024",
            "4xb4-80k_ade20k-512x512",
            "4xb4-160k_ade20k-512x512",
        )
    )
    rows = table_rows(osp.join(REPO, "configs", "hamnet", "README.md"))
    for model in marked:
        assert "Results" not in model, model["Name"]
        assert model["Metadata"]["Architecture"][0] in ("R-50-D8", "R-101-D8")
        (row,) = [r for r in rows if any(f"]({model['Name']}.py)" in c for c in r)]
        assert row.count("not trained here") == 2 and f"`{model['Weights']}`" in row, row
