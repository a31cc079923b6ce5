"""Release hygiene: every relative link in README.md, docs/ and the clients' READMEs resolves to
a file in the repository, and every ``#anchor`` to a heading of the file it names. External
links are not fetched (nothing leaves this machine); they must at least be well-formed."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def documents() -> list[Path]:
    found = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    found += sorted((REPO / "editor-clients").glob("*/README.md"))
    return [path for path in found if path.is_file()]


def links(text: str) -> list[str]:
    text = FENCE.sub("", text)
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return [a or b for a, b in LINK.findall(text)]


def anchors(path: Path) -> set[str]:
    """GitHub's heading slugs: lower case, punctuation dropped, spaces to hyphens."""
    slugs: set[str] = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match:
            title = re.sub(r"[`*_]", "", match.group(1)).strip().lower()
            slugs.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return slugs


def broken_links(path: Path) -> list[str]:
    problems = []
    for target in links(path.read_text(encoding="utf-8")):
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            if not parts.netloc:
                problems.append(f"{target}: malformed URL")
            continue
        if parts.scheme:  # mailto:, fleet:, ...
            continue
        file = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
        if not file.exists():
            problems.append(f"{target}: no such file")
        elif parts.fragment and file.suffix == ".md" and parts.fragment not in anchors(file):
            problems.append(f"{target}: no heading #{parts.fragment}")
    return problems


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_the_link_check_finds_planted_broken_links(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope)\n"
        "`[code](not-a-link.md)`\n```\n[fenced](not-a-link.md)\n```\n[url](https://)\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "there.md#nope: no heading #nope",
        "https://: malformed URL",
    ]
