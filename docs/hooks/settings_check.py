"""MkDocs hook: every runtime setting must have a row on the Settings page.

The page is written by hand; this hook fails a strict build when a setting of
``apgaspy.config.SETTINGS`` (or of GLB's table, where it is found) is missing from it, so a
new setting cannot go undocumented.
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger("mkdocs.hooks.settings_check")

PAGE = "reference/settings.md"
# (module, table attribute, prefix); a module that does not import is skipped with a note.
TABLES = [
    ("apgaspy.config", "SETTINGS", "APGAS_"),
    ("glb._config", "GLB_SETTINGS", "GLB_"),
    ("benchmarks.kernels._backend", "KERNEL_SETTINGS", "APGAS_"),
]


def on_page_markdown(markdown, page, config, files):
    """Warn (an error under ``--strict``) about settings the page does not name."""
    if page.file.src_uri != PAGE:
        return markdown
    for module, attr, prefix in TABLES:
        try:
            table = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            log.info("settings check: %s.%s not found (%s); skipped", module, attr, exc)
            continue
        for name in table:
            if f"`{prefix}{name}`" not in markdown:
                log.warning("%s does not document the setting %s%s (from %s.%s)",
                            PAGE, prefix, name, module, attr)
    return markdown
