"""tools/lib/images.py (tools/infer.py): only complete images are decoded; every other file is
named and refused."""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np
import pytest

from hamseg.datasets.loading import InvalidSampleError, read_image_rgb
from tools.lib.images import collect_inputs, gather_inputs


def _smooth(h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[:h, :w]
    return np.stack([x * 3 % 256, y * 5 % 256, (x + y) % 256], -1).astype(np.uint8)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("decode")
    paths = {
        k: str(root / n)
        for k, n in (
            ("jpg", "full.jpg"),
            ("cut_jpg", "cut.jpg"),
            ("png", "full.png"),
            ("cut_png", "cut.png"),
            ("text", "notes.png"),
            ("empty", "empty.jpg"),
            ("folder", "folder.png"),
        )
    }
    for key, ext in (("jpg", ".jpg"), ("png", ".png")):
        data = cv2.imencode(ext, _smooth(45, 61))[1].tobytes()
        with open(paths[key], "wb") as f:
            f.write(data)
        with open(paths["cut_" + key], "wb") as f:
            f.write(data[: len(data) * 2 // 3])
    with open(paths["text"], "w") as f:
        f.write("not an image\n")
    open(paths["empty"], "wb").close()
    os.makedirs(paths["folder"])
    return paths


def test_inputs_that_are_not_complete_images_are_named_in_one_line(files):
    # the reader is hamseg.datasets.loading's (tests/datasets/test_loading.py); here: what
    # tools/infer.py reports for each kind of bad input
    assert np.array_equal(read_image_rgb(files["png"]), _smooth(45, 61)[:, :, ::-1])
    for key, pattern in (
        ("cut_jpg", r"^image file '.*cut\.jpg' is corrupt: truncated"),
        ("cut_png", r"^image file '.*cut\.png' is corrupt or not an image"),
        ("text", r"^image file '.*notes\.png' is corrupt or not an image \(.* its 13 bytes\)"),
        ("empty", r"^image file '.*empty\.jpg' is empty \(0 bytes\)"),
        ("folder", r"^image file '.*folder\.png' cannot be read"),
    ):
        with pytest.raises(InvalidSampleError, match=pattern) as err:  # exit 2 under run_cli
            read_image_rgb(files[key])
        assert "\n" not in str(err.value)


def test_list_entries_that_cannot_be_images_are_set_aside_with_one_line_each(files, tmp_path):
    good = tmp_path / "list.txt"
    good.write_text(f"# mine\n{files['jpg']}\n\nmissing.png\n{files['cut_png']}\n")
    prose = tmp_path / "notes.txt"
    prose.write_text("Meeting notes\nThe model looks fine on the new photos.\n")
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81 binary")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    inputs = [str(good), str(prose), files["png"], str(binary), str(empty)]
    paths, skipped = gather_inputs(inputs)
    # the truncated PNG is passed on: reading it names it (segment_images skips it)
    assert paths == [files["jpg"], files["cut_png"], files["png"]]
    assert [path for path, _ in skipped] == [
        str(tmp_path / "missing.png"),
        str(prose),
        str(binary),
        str(empty),
    ]
    messages = [message for _, message in skipped]
    assert messages[0] == f"image listed in {good} not found: missing.png"
    assert messages[1] == (
        f"{prose}: a .txt input is a list of image paths, one a line, but no line of it names "
        "an image or an existing file (line 1: 'Meeting notes')"
    )
    assert (
        messages[2] == f"{binary}: a .txt input is a list of image paths, but it is not UTF-8 text"
    )
    assert messages[3].startswith(f"{empty}: ") and messages[3].endswith("but it lists none")
    assert all("\n" not in m for m in messages)
    with pytest.raises(FileNotFoundError, match="notes.txt: a .txt input is a list"):
        collect_inputs([str(prose)])  # the strict variant (analysis tools) refuses
    with pytest.raises(FileNotFoundError, match="input not found: .*nope.png"):
        gather_inputs([str(tmp_path / "nope.png")])  # a missing input given directly: exit 2


def test_an_image_named_twice_is_gathered_once(files, tmp_path):
    """Directly, in a list and through its folder: one path (its outputs would overwrite)."""
    listed = tmp_path / "twice.txt"
    listed.write_text(f"{files['jpg']}\n{files['jpg']}\n")
    folder = osp.dirname(files["jpg"])
    paths, skipped = gather_inputs([files["jpg"], str(listed), folder])
    assert paths.count(files["jpg"]) == 1 and skipped == []
    assert len(paths) == len({osp.realpath(p) for p in paths})
    assert paths[0] == files["jpg"]  # the first mention keeps its place
