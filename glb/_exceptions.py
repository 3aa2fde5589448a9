"""GLB's own errors, in one place.

GLB raises apgaspy's errors for what is apgaspy's (a place died: ``DeadPlaceError`` inside a
``MultipleException``; a malformed ``GLB_*`` variable: ``ConfigurationError``; the program's
handler taken: ``MalleabilityError``) and these for what is GLB's alone::

    apgaspy.ApgasError (a RuntimeError)
    └── GLBError
        └── PlaceZeroOnlyError
"""

from __future__ import annotations

from apgaspy import ApgasError

__all__ = ["GLBError", "PlaceZeroOnlyError"]


class GLBError(ApgasError):
    """The base of GLB's own errors (never raised itself); an :class:`apgaspy.ApgasError`, so
    a ``RuntimeError`` too."""


class PlaceZeroOnlyError(GLBError):
    """A GLB computation was started away from place 0.

    Raised by :func:`glb.compute_dynamic` and :func:`glb.compute_static` when called at any
    other place (from inside an ``async_at``, say), before any work is done: a computation
    spans every place and is driven from place 0, which owns the malleable handler and
    gathers the result (Saraswat et al., PPoPP 2011, and APGAS for Java's GLB).
    """
