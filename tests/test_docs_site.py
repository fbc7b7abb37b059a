"""The manual builds as a site: mkdocs.yml's nav lists every page of docs/ (a page left out of
the nav cannot be found), and every link of the README and of docs/ resolves, anchors included.

Checked in pure Python, so the test suite needs no mkdocs; where mkdocs is installed the real
`mkdocs build --strict` runs too."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from testdata import ROOT

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names (`- Title: page.md` or `- page.md`, at any depth)."""
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s+- (?:[^:\n]+: )?([^\s:]+\.md)\s*$", nav, re.M)


def slug(heading: str) -> str:
    """The anchor GitHub (and mkdocs' toc with GitHub-style slugs) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # no headings in code
    return {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_nav_lists_every_page_once() -> None:
    listed = nav_pages()
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == {p.name for p in DOCS.glob("*.md")}


def test_config_points_at_docs() -> None:
    text = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^docs_dir: docs$", text, re.M) and re.search(r"^strict: true$", text, re.M)


def test_slug_is_githubs() -> None:
    assert slug("Every core, and a cluster (`--jobs N`, `--dask ADDRESS`)") == \
        "every-core-and-a-cluster---jobs-n---dask-address"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    """A link leads to a file of the repository, and its #anchor to a heading there."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        assert path.exists() and ROOT in path.parents, f"{page.name} links to {target}"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.name} links to {target}: no such heading"


def test_mkdocs_builds_strict(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "index.html").exists()
