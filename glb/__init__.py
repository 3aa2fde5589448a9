"""Lifeline-based global load balancing (GLB) on apgaspy.

Public API: the bag protocol (``Bag``), result types (``Fold``, ``LongSum``, ``ArraySum``) and
``process_all`` (sequential baseline).  The distributed ``compute_dynamic``/``compute_static``
are added by the GLB runtime module.
"""

from ._bag import Bag, process_all
from ._fold import ArraySum, Fold, LongSum

__all__ = ["Bag", "Fold", "LongSum", "ArraySum", "process_all"]
