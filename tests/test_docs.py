"""The README and docs/ as a reader follows them: every relative link reaches a file of the repository, and every
anchor a heading of the page it names. Hand-written over markdown-it's tokens rather than an MkDocs build, because
the pages link to the repository's configs, code and reference data, outside any docs directory MkDocs would
accept under --strict."""

import re
from pathlib import Path

import pytest
from conftest import REPO
from markdown_it import MarkdownIt

from kdflow.workflow.config_files import SCHEMA, load_config_file
from kdflow.workflow.config_reference import PAGE, reference_page

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    tokens = MarkdownIt().parse(page.read_text())
    return {slug(tokens[i + 1].content) for i, token in enumerate(tokens) if token.type == "heading_open"}


def links(page: Path) -> list[str]:
    found = []
    for token in MarkdownIt().parse(page.read_text()):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(child.attrs["href"])
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for href in links(page):
        if re.match(r"[a-z]+:", href):
            continue  # web addresses: not checked offline
        path, _, anchor = href.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or REPO not in [target, *target.parents]:
            broken.append(href)
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(href)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(REPO).as_posix() for page in PAGES])
def test_every_link_reaches_a_file_and_every_anchor_a_heading(page):
    assert broken_links(page) == []


def test_the_readme_is_short_and_reaches_every_page_of_the_docs():
    readme = REPO / "README.md"
    assert len(readme.read_text().splitlines()) <= 150
    reached = {(readme.parent / href.partition("#")[0]).resolve() for href in links(readme)}
    assert {page.resolve() for page in PAGES[1:]} <= reached


def test_the_configuration_reference_is_generated_from_the_current_schema():
    assert PAGE.read_text() == reference_page(load_config_file(SCHEMA)), \
        "run python -m kdflow.workflow.config_reference"
    assert "| `generation.sampling.temperature` | number | `1.0` |" in PAGE.read_text()


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path, monkeypatch):
    monkeypatch.setattr("test_docs.REPO", tmp_path)
    (tmp_path / "a.md").write_text("# Title here\n\n[ok](b.md#part-one) [no file](c.md) [no anchor](b.md#nowhere)"
                                   " [self](#title-here) [web](https://example.org/x)\n")
    (tmp_path / "b.md").write_text("## Part one\n")
    assert broken_links(tmp_path / "a.md") == ["c.md", "b.md#nowhere"]
