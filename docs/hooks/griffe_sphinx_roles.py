"""Griffe extension: read the Sphinx roles of the docstrings as code.

The docstrings follow the Google style but name other objects with Sphinx roles
(``:class:`DeadPlaceError```, ``:func:`~apgaspy.run```) and end a paragraph before a code
block with ``::``.  mkdocstrings does not interpret either, so this extension rewrites them
before the docstrings are parsed: a role becomes inline code (the last component of the name
where the role asked for it with ``~``), and a trailing ``::`` a single ``:``.

A line of an ``Args:``/``Raises:``/... section whose first colon belongs to a role is left as
it is, since the Google parser reads that colon as the item's separator.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|ref)"
                   r":`(~?)([^`<]+?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"(\S)::[ \t]*$")
# Sections whose items are "name: description" (Returns and Yields items need no colon).
_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|"
                      r"Other Parameters|Attributes|Raises|Exceptions|Warns):\s*$")


def _role(match: re.Match[str]) -> str:
    name = match.group(2).strip()
    if match.group(1):
        name = name.rsplit(".", 1)[-1]
    return f"`{name}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` with its roles and trailing ``::`` rewritten."""
    out: list[str] = []
    section_indent: int | None = None
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(line)
        if header:
            section_indent = len(header.group(1))
        elif line.strip() and section_indent is not None and indent <= section_indent:
            section_indent = None
        role = _ROLE.search(line)
        if (section_indent is not None and not header and role is not None
                and line.find(":") == role.start()):
            out.append(line)  # the role's colon is the item separator the parser expects
            continue
        out.append(_LITERAL.sub(r"\1:", _ROLE.sub(_role, line)))
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles and ``::`` in every docstring, as described above."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        doc = obj.docstring
        if doc is not None and doc.value:
            doc.value = rewrite(doc.value)
