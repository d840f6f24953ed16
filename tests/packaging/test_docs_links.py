"""What the docs and the error messages point to exists: every relative link (and its #anchor),
every repository path and test named in backticks, every "docs/X.md, "Section"" and README
section named in code."""

from __future__ import annotations

import ast
import glob
import os.path as osp
import re

import pytest

from tests.conftest import REPO

#: Markdown files a user reads.
PAGES = sorted(
    [osp.join(REPO, "README.md"), osp.join(REPO, "CHANGELOG.md")]
    + glob.glob(osp.join(REPO, "docs", "**", "*.md"), recursive=True)
    + glob.glob(osp.join(REPO, "configs", "**", "*.md"), recursive=True)
    + glob.glob(osp.join(REPO, "projects", "**", "*.md"), recursive=True)
    + glob.glob(osp.join(REPO, "data", "*.md"))
)
#: Files whose strings and comments name docs: the package and the tools.
CODE = sorted(
    glob.glob(osp.join(REPO, "hamseg", "**", "*.py"), recursive=True)
    + glob.glob(osp.join(REPO, "tools", "**", "*.py"), recursive=True)
    + glob.glob(osp.join(REPO, "tools", "**", "*.sh"), recursive=True)
    + glob.glob(osp.join(REPO, "projects", "**", "*.py"), recursive=True)
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: A repository path in backticks: a top-level folder of the repository, then no placeholders.
PATH = re.compile(r"`((?:configs|hamseg|tools|tests|docs|projects)/[\w./-]*\w(?:::\w+)?)`")
#: A named section: docs/X.md, "Section" or README(.md), "Section".
SECTION = re.compile(r"((?:docs/[\w/.-]+\.md)|(?:[\w.-]+/)*README(?:\.md)?)[,:] \"([^\"]+)\"")
#: Files the docs tell users to create (``cp configs/custom/... configs/custom/my_dataset.py``).
USER_FILES = {"configs/custom/my_dataset.py"}


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(path: str) -> list[str]:
    out, fenced = [], False
    for line in read(path).split("\n"):
        fenced ^= line.startswith("```")
        if not fenced and (m := re.match(r"#+ (.+)", line)):
            out.append(m[1].strip())
    return out


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: osp.relpath(p, REPO))
def test_relative_links_and_anchors_exist(page):
    broken = []
    for link in LINK.findall(read(page)):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = osp.normpath(osp.join(osp.dirname(page), path)) if path else page
        if not osp.exists(target):
            broken.append(f"{link}: no {osp.relpath(target, REPO)}")
        elif anchor and target.endswith(".md") and anchor not in map(slug, headings(target)):
            broken.append(f"{link}: no heading #{anchor} in {osp.relpath(target, REPO)}")
    assert not broken, broken


def _placeholder(name: str) -> bool:
    """A name with a placeholder component (``configs/X.py``, ``work_dirs/NAME``)."""
    return any(re.fullmatch(r"[A-Z_]+(\.\w+)?", part) for part in re.split(r"[/:]", name))


def _exists(name: str) -> bool:
    path, _, test = name.partition("::")
    full = osp.join(REPO, path)
    if not osp.exists(full):
        return False
    if not test:
        return True
    tree = ast.parse(read(full))
    return any(getattr(node, "name", None) == test for node in ast.walk(tree))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: osp.relpath(p, REPO))
def test_repository_paths_and_tests_named_in_docs_exist(page):
    names = [name for name in PATH.findall(read(page)) if not _placeholder(name)]
    names = [name for name in names if name not in USER_FILES]
    missing = [name for name in names if not _exists(name)]
    if page.endswith("CHANGELOG.md") or "/docs/reports/" in page:  # history: dated records
        return
    assert not missing, missing


def test_sections_named_in_code_and_docs_exist():
    missing = []
    for path in CODE + [p for p in PAGES if "/docs/reports/" not in p]:
        for doc, section in SECTION.findall(read(path)):
            section = " ".join(section.split())  # a name wrapped over two lines
            target = osp.join(REPO, doc + (".md" if doc.endswith("README") else ""))
            titles = [h.replace("`", "") for h in headings(target)] if osp.exists(target) else []
            if not any(title.startswith(section) for title in titles):  # a heading's start
                missing.append(f"{osp.relpath(path, REPO)}: {doc}, {section!r}")
    assert not missing, missing


def test_docs_named_in_code_exist():
    missing = []
    for path in CODE:
        for doc in re.findall(r"docs/[\w/.-]+\.md", read(path)):
            if not osp.exists(osp.join(REPO, doc)):
                missing.append(f"{osp.relpath(path, REPO)}: {doc}")
    assert not missing, missing
