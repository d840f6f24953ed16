"""first_items: how a one-line message lists what it names."""

from hamseg.utils.messages import first_items


def test_lists_at_most_limit_items_and_marks_the_rest():
    assert first_items(["road", "tree", "sky"], 3) == "road, tree, sky"
    assert first_items(["road", "tree", "sky", "car"], 3) == "road, tree, sky, ..."
    assert first_items([7, 255], 20) == "7, 255"
    assert first_items((), 6) == ""
