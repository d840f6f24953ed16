"""first_items and one_line: how a one-line message lists what it names and quotes an error."""

from hamseg.utils.errors import first_items, one_line


def test_lists_at_most_limit_items_and_marks_the_rest():
    assert first_items(["road", "tree", "sky"], 3) == "road, tree, sky"
    assert first_items(["road", "tree", "sky", "car"], 3) == "road, tree, sky and 1 more"
    assert first_items([7, 255], 20) == "7, 255"
    assert first_items((), 6) == ""


def test_one_line_joins_the_lines_of_an_error_and_keeps_at_most_limit_characters():
    err = RuntimeError("Sizes of tensors must match.\n  Expected 64   but got 63\n")
    assert one_line(err) == "Sizes of tensors must match. Expected 64 but got 63"
    assert one_line(err, 12) == "Sizes of ten"
