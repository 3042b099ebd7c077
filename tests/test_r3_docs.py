"""The README and docs/: the README stays short and every link between them leads somewhere."""

from __future__ import annotations

import re

from .conftest import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path) -> set[str]:
    """The fragment of each heading, as GitHub makes it."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_at_most_450_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 450


def test_every_relative_link_of_the_readme_and_docs_leads_to_a_file_and_heading():
    checked = 0
    for document in DOCUMENTS:
        for target in LINK.findall(document.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, fragment = target.partition("#")
            path = (document.parent / file).resolve() if file else document
            assert path.exists(), (document.name, target)
            if fragment:
                assert fragment in anchors(path), (document.name, target)
            checked += 1
    assert checked >= 20


def test_the_readme_links_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert f"(docs/{page.name}" in readme, page.name
