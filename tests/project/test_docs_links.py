"""The docs' links and the code's references to them hold (issue 35 item 7).

A reference from code, help texts, recipes, the Makefile or the docs to a section is written
`docs/PAGE.md, "Heading"` or `README, "Heading"` (also `README's "Heading"`); each must name a
file and a heading that exist. Every markdown link in README.md and docs/ to a local file must
find it, and a `#anchor` the heading it names (fenced code is not read). `make docs` builds the
site with `mkdocs build --strict` on top of this; these checks need no mkdocs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.paths import REPO

GENERATED = {"docs/cli.md": "docs/cli_reference.py"}  # made by `make docs`, not committed
REFERENCE = re.compile(r"""(docs/[\w-]+\.md|README)(?:,|'s) \\?"([^"\\]+)\\?\"""")
OLD_STYLE = re.compile(r"README[:,] (?!\")[A-Z]")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


THIS = Path(__file__).resolve()


def _tracked(*suffixes: str) -> list[Path]:
    """Tracked files with these suffixes (and the Makefile), this test's own examples aside."""
    names = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        REPO / n
        for n in names
        if (Path(n).suffix in suffixes or Path(n).name == "Makefile")
        and not n.startswith("tests/fixtures/data/")
        and (REPO / n).is_file()
        and (REPO / n).resolve() != THIS
    ]


def _prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _headings(path: Path) -> list[str]:
    return [
        re.sub(r"`", "", m.group(1)).strip()
        for m in re.finditer(r"^#{1,6} (.+)$", _prose(path.read_text()), re.M)
    ]


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (mkdocs) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.lower())
    return re.sub(r"[-\s]+", "-", text).strip("-")


def _target(name: str) -> Path:
    return REPO / ("README.md" if name == "README" else name)


def test_every_section_reference_names_a_heading_that_exists():
    missing = []
    for path in _tracked(".py", ".md", ".toml"):
        text = path.read_text()
        for match in REFERENCE.finditer(text):
            target, heading = _target(match.group(1)), match.group(2)
            if match.group(1) == "docs/PAGE.md":  # the form itself, as CHANGELOG states it
                continue
            if not target.is_file() or heading not in _headings(target):
                missing.append(f"{path.relative_to(REPO)}: {match.group(0)}")
    assert not missing, "references to sections that do not exist:\n" + "\n".join(missing)


def test_no_reference_in_the_old_unquoted_form():
    """`README: GPU decoding` named sections that did not exist; the quoted form is checked."""
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in _tracked(".py", ".toml")
        for match in OLD_STYLE.finditer(path.read_text())
    ]
    assert not found, found


def _doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", _doc_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_local_link_finds_its_file_and_heading(page):
    broken = []
    for link in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+://|mailto:", link):
            continue
        file_part, _, anchor = link.partition("#")
        target = (page.parent / file_part).resolve() if file_part else page
        relative = target.relative_to(REPO).as_posix() if target.is_relative_to(REPO) else None
        if relative in GENERATED:
            assert (REPO / GENERATED[relative]).is_file()
            continue
        if not target.exists():
            broken.append(f"{link}: no file {target}")
        elif anchor and target.suffix == ".md":
            if anchor not in {_slug(h) for h in _headings(target)}:
                broken.append(f"{link}: no heading with anchor #{anchor} in {relative}")
    assert not broken, "\n".join(broken)


def test_every_page_is_in_the_site_navigation():
    nav = (REPO / "mkdocs.yml").read_text()
    pages = {p.name for p in (REPO / "docs").glob("*.md")} | {"cli.md"}
    assert {p for p in pages if p not in nav} == set()


def test_the_readme_is_what_a_newcomer_needs():
    """The README keeps the quick start, the commands, the demo's table and how to reproduce
    it, and links every page; the rest lives in docs/."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for heading in ("Quick start", "Commands", "Reproducing the demo", "Documentation"):
        assert heading in _headings(REPO / "README.md")
    for page in (REPO / "docs").glob("*.md"):
        if page.name != "index.md":
            assert f"docs/{page.name}" in readme, page.name
