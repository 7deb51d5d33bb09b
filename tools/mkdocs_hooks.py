"""The site's build hook (mkdocs.yml `hooks:`): adds the reference pages generated from the code,
and the repository's own documents (ARCHITECTURE.md, TESTING.md, BENCHMARKS.md, CHANGELOG.md)
with the benchmark plots, so each is written once, where a clone's reader finds it too."""

from __future__ import annotations

import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from mkdocs.structure.files import File, Files

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from reference_pages import pages  # noqa: E402  (tools/ is no package)

# The repository's documents, by the page each becomes in the site.
DOCUMENTS = {
    "ARCHITECTURE.md": "architecture.md",
    "TESTING.md": "testing.md",
    "BENCHMARKS.md": "benchmarks.md",
    "CHANGELOG.md": "changelog.md",
}
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def on_files(files: Files, config: Any) -> Files:
    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    for document, page in DOCUMENTS.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / document)))
    for plot in sorted((ROOT / "bench" / "plots").glob("*")):
        if plot.suffix in (".png", ".svg"):
            uri = f"bench/plots/{plot.name}"
            files.append(File.generated(config, uri, abs_src_path=str(plot)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A repository document's links as the site has them: another document by its page, a
    file outside docs/ (code, a deploy file) as its path, which the site does not serve."""
    here = PurePosixPath(page.file.src_uri).parent
    root_document = page.file.src_uri in DOCUMENTS.values()

    def relink(match: re.Match[str]) -> str:
        bang, text, target = match.groups()
        if re.match(r"^[a-z]+:|^#|^/", target):
            return match.group(0)
        path, _, fragment = target.partition("#")
        if root_document and path in DOCUMENTS:
            return f"{bang}[{text}]({DOCUMENTS[path]}{'#' + fragment if fragment else ''})"
        if not root_document and _normal(here / path) is not None:
            return match.group(0)  # a page of the site's own: MkDocs checks it is there
        if root_document and files.get_file_from_path(path) is not None:
            return match.group(0)
        shown = path.lstrip("./")
        return text if shown in text else f"{text} (`{shown}`)"

    return LINK.sub(relink, markdown)


def _normal(path: PurePosixPath) -> PurePosixPath | None:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts)
