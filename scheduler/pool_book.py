"""The pool's state machine (:mod:`scheduler.pool` binds it to the server): which nodes are
being drained, drained, gone or added, and whether a change is refused.  Pure: plain data in
and out, no process, no clock, no lock (the caller's guards it).

::

    free/busy ──drain──► draining ──(no job holds it)──► drained ──add──► free
    free/busy ──remove─► draining ──(no job holds it)──► gone ──add──► free (a new node)
    draining ──add──► free/busy (the drain is called off)
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .algorithms.base import node_key

__all__ = ["ACTIONS", "NODE_STATES", "PoolBook"]

#: The requests: ``add`` a node, ``drain`` it (it stays, held out), ``remove`` it.
ACTIONS = ("add", "drain", "remove")
#: What ``status`` says of a node.
NODE_STATES = ("free", "busy", "draining", "drained", "gone")
#: Pool changes kept for ``status`` and in the journal (the latest).
_KEPT_CHANGES = 100


@dataclass
class PoolBook:
    """The pool's changes (module docstring): the pure part, no process, no clock.

    Attributes:
        draining: node -> ``"drain"`` or ``"remove"``, for nodes being emptied.
        force: draining nodes whose jobs are ended rather than waited for.
        drained: nodes a drain emptied: held out of the pool until added again.
        gone: nodes removed, in the order they left.
        added: nodes added while the scheduler ran -> their CPUs (None: a slot).
        changes: ``{"t", "change", "nodes", ...}`` records (``t``: server seconds; the
            server adds ``wall``, seconds since the epoch, and ``force``), the latest
            :data:`_KEPT_CHANGES`.
    """

    draining: dict[str, str] = field(default_factory=dict)
    force: set[str] = field(default_factory=set)
    drained: set[str] = field(default_factory=set)
    gone: list[str] = field(default_factory=list)
    added: dict[str, list[int] | None] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)

    def held_out(self, node: str) -> bool:
        """Whether no new job may be placed on ``node`` (draining or drained)."""
        return node in self.draining or node in self.drained

    def state_of(self, node: str, holder: int | None) -> str:
        """One of :data:`NODE_STATES` for ``node``, held by job ``holder`` (or None)."""
        if node in self.gone:
            return "gone"
        if node in self.draining:
            return "draining"
        if node in self.drained:
            return "drained"
        return "busy" if holder is not None else "free"

    def refusal(self, action: str, names: Sequence[str], nodes: Collection[str],
                needs: Mapping[str, int] | None = None, *,
                may_empty: bool = False, force: bool = False) -> str | None:
        """Why ``action`` (``drain`` or ``remove``) of ``names`` is refused, or None.

        Args:
            nodes: the pool's nodes now (gone ones left out).
            needs: ``"job <id> '<name>'"`` -> its minimum node count, for the queued jobs.
            may_empty: the pool grows again by itself (a Slurm pool): what would be left
                is not checked.
            force: a forced change: a removal under way without ``--force`` may be
                forced (its jobs are then ended, as a node lost is).

        Returns:
            One line: no name, an unknown node, one gone already, a drain of a node
            already draining or drained, or (unless ``may_empty``) what would be left: no
            node, or fewer than a queued job needs.
        """
        if action not in ("drain", "remove"):
            return f"unknown node action {action!r}: use {', '.join(ACTIONS)}"
        if not names:
            return f"name the node(s) to {action}"
        for name in names:
            if name in self.gone:
                return f"{name} has left the pool already"
            if name not in nodes:
                known = ", ".join(sorted(nodes, key=node_key)) or "none"
                return f"unknown node {name!r} (the nodes: {known})"
            if action == "drain" and self.held_out(name):
                return f"{name} is {'draining' if name in self.draining else 'drained'} already"
            if (action == "remove" and self.draining.get(name) == "remove"
                    and (not force or name in self.force)):
                return f"{name} is being removed already"
        if may_empty:
            return None
        lasting = [n for n in nodes if n not in names and not self.held_out(n)]
        if not lasting:
            return f"{action} {' '.join(names)} would leave no node to run jobs on"
        for job, need in (needs or {}).items():
            if need > len(lasting):
                return (f"{action} {' '.join(names)} would leave {len(lasting)} node"
                        f"{'s' if len(lasting) != 1 else ''}; {job} needs {need}")
        return None

    def mark(self, action: str, names: Sequence[str], *, force: bool = False) -> None:
        """Start draining ``names`` (checked by :meth:`refusal`): ``remove`` lets them go
        once empty, ``drain`` keeps them held out; ``force``: their jobs are ended."""
        for name in names:
            self.drained.discard(name)
            self.draining[name] = action
            if force:
                self.force.add(name)

    def back(self, name: str) -> bool:
        """``node add`` of a node held out (draining or drained): it serves again.
        Returns whether it was held out (False: not a node of this book's)."""
        was = self.held_out(name)
        self.draining.pop(name, None)
        self.force.discard(name)
        self.drained.discard(name)
        return was

    def added_node(self, name: str, cpus: Sequence[int] | None) -> None:
        """A node joined the pool (``cpus``: its CPUs, or None: a slot)."""
        self.added[name] = None if cpus is None else list(cpus)
        if name in self.gone:
            self.gone.remove(name)

    def settle(self, held: Collection[str]) -> list[tuple[str, str]]:
        """The draining nodes that no job holds (not in ``held``) leave: returns
        ``(node, "gone" | "drained")`` for each, in node order."""
        out = []
        for name in sorted(self.draining, key=node_key):
            if name in held:
                continue
            action = self.draining.pop(name)
            self.force.discard(name)
            if action == "remove":
                self.gone.append(name)
                self.added.pop(name, None)
                out.append((name, "gone"))
            else:
                self.drained.add(name)
                out.append((name, "drained"))
        return out

    def record(self, t: float, change: str, nodes: Sequence[str], **extra: Any) -> None:
        """Keep one change (``t`` in server seconds) for ``status``."""
        self.changes.append({"t": round(t, 3), "change": change, "nodes": list(nodes),
                             **extra})
        del self.changes[:-_KEPT_CHANGES]

    def to_json(self) -> str:
        """The book as JSON (the journal's ``meta`` value)."""
        return json.dumps({"draining": self.draining, "force": sorted(self.force),
                           "drained": sorted(self.drained), "gone": self.gone,
                           "added": self.added, "changes": self.changes})

    @classmethod
    def from_json(cls, text: str) -> PoolBook:
        """A book from :meth:`to_json`'s text; unknown keys are ignored.

        Raises:
            ValueError: not a JSON object.
        """
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError(f"the pool's journal entry is not a JSON object: {text[:80]!r}")
        return cls(draining=dict(raw.get("draining", {})), force=set(raw.get("force", [])),
                   drained=set(raw.get("drained", [])), gone=list(raw.get("gone", [])),
                   added=dict(raw.get("added", {})), changes=list(raw.get("changes", [])))
