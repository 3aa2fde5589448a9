"""MkDocs hook: publish the measured figures of ``benchmarks/results/`` with the site.

The pages link to the charts where they live in the repository (``../benchmarks/results/
x.png`` from ``docs/benchmarks.md``, which is right when the page is read on a forge), and
``python -m benchmarks.report`` writes the results table with such links.  MkDocs only
publishes files under ``docs/``, so this hook adds every PNG of ``benchmarks/results/`` to
the site as ``results/<name>`` and points the links of each page there.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SITE_DIR = "results"
# A link target naming benchmarks/results/<file>, with or without leading ../ segments.
_LINK = re.compile(r"\]\(((?:\.\./)*)benchmarks/results/([A-Za-z0-9_.-]+\.png)\)")


def on_files(files, config):
    """Add the result charts to the site's files."""
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"{SITE_DIR}/{png.name}",
                                    abs_src_path=str(png)))
    return files


def on_page_markdown(markdown, page, config, files):
    """Point links to ``benchmarks/results/*.png`` at the copies published with the site."""
    here = posixpath.dirname(page.file.src_uri)

    def repl(match: re.Match[str]) -> str:
        target = f"{SITE_DIR}/{match.group(2)}"
        return f"]({posixpath.relpath(target, here or '.')})"

    return _LINK.sub(repl, markdown)
