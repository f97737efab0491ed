"""The README is a door, not a notebook: at most 300 lines, and every relative link in it and in
docs/*.md leads somewhere (an existing file and, for a ``#anchor``, a heading of that file under
GitHub's slug rules). Links inside code blocks and inline code are not links and are skipped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
README_MAX_LINES = 300
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) or [text](target "title"); images too (the leading ! does not matter here)
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+\1")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than ``-`` and
    ``_`` removed, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file, numbered as GitHub numbers repeated headings."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    return [m.group(1) for line in _prose_lines(path.read_text()) for m in LINK.finditer(line)]


def broken_links(path: Path) -> list[str]:
    """``target: why`` for each relative link of ``path`` that leads nowhere."""
    bad = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / file_part).resolve()
        if not dest.exists():
            bad.append(f"{target}: no such file {dest}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    return bad


def test_the_readme_is_at_most_300_lines() -> None:
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, (
        f"README.md has {n} lines (at most {README_MAX_LINES}): move the detail into docs/ and link to it")


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(doc: Path) -> None:
    assert broken_links(doc) == []


def test_the_readme_maps_every_document_in_docs() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    missing = [p.name for p in DOCUMENTS[1:] if p.resolve() not in linked]
    assert missing == [], f"docs/ files the README's map does not link: {missing}"


def test_the_checker_catches_what_it_claims(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Title\n\n## What's `new`: a (short) list\n\n## Title\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n\n"
        "[ok](other.md) [ok](other.md#whats-new-a-short-list) [ok](other.md#title-1) [ok](#doc)\n"
        "[ok](https://example.org/x#y) `[not a link](nowhere.md)`\n"
        "```\n[not a link](nowhere.md)\n```\n"
        "[bad](missing.md) [bad](other.md#nope) [bad](#nope)\n")
    assert [b.split(":")[0] for b in broken_links(doc)] == ["missing.md", "other.md#nope", "#nope"]
