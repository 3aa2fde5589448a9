"""The keeper of a Slurm pool: placeholders asked for, their nodes added, idle ones given back.

A thread beside the scheduler (``serve --slurm-pool MIN:MAX``), on the server's public
calls only (``status``, ``node_add``, ``node_remove``, the journal's meta), as the child
scheduler's link to its parent (:mod:`scheduler.child`):

::

    every 0.1 s:
        scancel the placeholders whose node left the pool          (SlurmPool.cancel_due)
        every poll_s (after k failures in a row: poll_s·2^k from the failure, at most 30 s):
            squeue ─► a placeholder running ─► node add <its node>
                    ─► one Slurm ended ─────► node remove <its node> (--force unless every
                       job there can be shrunk off it: malleable, above its minimum, not its
                       first node), in status' pool.slurm.lost
        fewer than MIN placeholders ─► sbatch until MIN
        the queue's head waited > wait_s, short of free nodes ─► sbatch the shortfall
            (less the placeholders pending; never more than MAX held + pending)
        no job waits, a node free for > idle_s, more than MIN held ─► node remove ─► gone
            ─► scancel of its placeholder (next tick)
        a node's placeholder with less than renew_s walltime left (at most half what it had
            when it began) ─► sbatch a replacement when the node is busy or a job waits
            (within MAX), node remove (jobs shrunk off it; what is left ends with it)

Slurm failing (``sbatch``, ``squeue``, ``scancel``) changes nothing in the pool: running jobs
run on, and ``status``'s ``pool.slurm`` shows the last error and the backoff.  After every
change the placeholders go to the journal (``meta`` key ``slurm_pool``); :meth:`PoolKeeper.adopt`
takes them back at a restart, before the server restores its pool.
Docs: docs/guides/scheduler.md, "Slurm pool on a shared site".
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ._exceptions import PoolError
from .slurm_commands import SlurmError
from .slurm_pool import Placeholder, SlurmPool

if TYPE_CHECKING:
    from .server import Server

__all__ = ["META_KEY", "PoolKeeper"]

log = logging.getLogger("scheduler.slurm_pool")

#: The journal's ``meta`` key of the placeholders.
META_KEY = "slurm_pool"
_TICK_S = 0.1


class PoolKeeper:
    """Keeps a :class:`~scheduler.slurm_pool.SlurmPool` between MIN and MAX nodes (module
    docstring).

    Args:
        server: the scheduler (made; :meth:`adopt` before its start, :meth:`start` after).
        pool: its node backend.
    """

    def __init__(self, server: Server, pool: SlurmPool) -> None:
        self.server = server
        self.pool = pool
        self.settings = pool.settings
        self._idle_since: dict[str, float] = {}
        self._renewing: set[int] = set()
        self._next_slurm = 0.0  # monotonic time Slurm may be asked again (backoff)
        self._next_poll = 0.0
        self._saved = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm-pool", daemon=True)

    def adopt(self) -> list[int]:
        """Take over the placeholders the journal names that Slurm still runs (none is
        cancelled); returns their ids.  A Slurm failure is counted (``status``), not
        raised: the keeper looks again at its next poll."""
        raw = self.server.journal_meta(META_KEY)
        if not raw:
            return []
        try:
            ids = self.pool.adopt(raw)
        except (SlurmError, ValueError) as exc:
            self.pool.failed(exc)
            return []
        self.pool.failed(None)
        return ids

    def start(self) -> None:
        """Start keeping the pool (the MIN placeholders are asked for at the first tick)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop keeping it (the placeholders stay; :meth:`SlurmPool.close` cancels them).
        Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(_TICK_S):
            if self.server.stopping:
                return
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the keeper must not stop the scheduler
                log.exception("slurm pool")

    # ------------------------------------------------------------------ one look

    def _slurm_ok(self, now: float) -> bool:
        return now >= self._next_slurm

    def _failed(self, exc: SlurmError, what: str) -> None:
        """Count a failed Slurm command: the backoff runs from its failure, not from the
        tick's start (a stopped slurmctld makes a command hang until its timeout)."""
        self.pool.failed(exc)
        self._next_slurm = time.monotonic() + self.pool.backoff_s
        self.server.record_event("pool_slurm_error", None, what=what, error=str(exc),
                                 failures=self.pool.failures, backoff_s=self.pool.backoff_s)

    def tick(self, now: float | None = None) -> None:
        """One look at Slurm (when due) and at the scheduler's queue and nodes."""
        now = time.monotonic() if now is None else now
        if self._slurm_ok(now):
            try:
                self.pool.cancel_due()
            except SlurmError as exc:
                self._failed(exc, "scancel")
        if self._slurm_ok(now) and now >= self._next_poll:
            try:
                _, ended = self.pool.poll()
            except SlurmError as exc:
                self._failed(exc, "squeue")
            else:
                self.pool.failed(None)
                self._next_poll = now + self.settings.poll_s
                st = self.server.status()
                for p in ended:
                    self._lost(p, st)
        st = self.server.status()
        states = {n["name"]: n["state"] for n in st["nodes"]}
        if self._join(states):
            st = self.server.status()
            states = {n["name"]: n["state"] for n in st["nodes"]}
        waiting = [j for j in st["jobs"] if j["state"] == "waiting"]
        self._give_back(states, waiting, now)
        self._renew(st, states, waiting, now)
        if self._slurm_ok(now):
            self._grow(st, states, waiting)
        self._save()

    def _join(self, states: dict[str, str]) -> bool:
        """Running placeholders whose node is not in the pool: node add.  Returns whether
        a node joined."""
        joined, any_joined = self.pool.joined(), False
        for p in self.pool.placeholders():
            if p.state != "RUNNING" or not p.node or p.node in joined:
                continue
            if states.get(p.node, "gone") != "gone":
                continue  # still leaving (draining) under an earlier placeholder
            try:
                self.server.node_add([p.node])
            except PoolError as exc:
                self.server.record_event("pool_join_failed", None, slurm_job=p.slurm_job,
                                         node=p.node, error=str(exc))
                continue
            self.server.record_event("pool_node_joined", None, slurm_job=p.slurm_job,
                                     node=p.node, left_s=p.left_s)
            any_joined = True
        return any_joined

    def _lost(self, p: Placeholder, st: dict[str, Any]) -> None:
        """Slurm ended placeholder ``p``: its node leaves (module docstring)."""
        entry = {"slurm_job": p.slurm_job, "node": p.node, "state": p.state,
                 "wall": round(time.time(), 3)}
        self.pool.lost = [*self.pool.lost, entry][-20:]
        self._renewing.discard(p.slurm_job)
        states = {n["name"]: n["state"] for n in st["nodes"]}
        if not p.node or states.get(p.node, "gone") == "gone":
            self.server.record_event("pool_placeholder_ended", None, **entry)
            return
        holders = [j for j in st["jobs"] if j["state"] == "running" and p.node in j["nodes"]]
        force = not all(j["elastic"] and j["class"] in ("malleable", "evolving")
                        and j["nodes"][0] != p.node and len(j["nodes"]) > j["min_nodes"]
                        for j in holders)
        self.server.record_event("pool_placeholder_ended", None, force=force,
                                 jobs=[j["id"] for j in holders], **entry)
        try:
            self.server.node_remove([p.node], force=force)
        except PoolError as exc:
            if "already" not in str(exc):
                self.server.record_event("pool_remove_failed", None, node=p.node,
                                         error=str(exc))

    def _give_back(self, states: dict[str, str], waiting: list[dict[str, Any]],
                   now: float) -> None:
        """Nodes idle longer than ``idle_s`` leave while no job waits (never below MIN)."""
        joined = self.pool.joined()
        for node in list(self._idle_since):
            if node not in joined or states.get(node) != "free":
                del self._idle_since[node]
        for node in joined:
            if states.get(node) == "free":
                self._idle_since.setdefault(node, now)
        if waiting:
            return
        serving = [n for n in joined if states.get(n) in ("free", "busy")]
        for node, since in sorted(self._idle_since.items(), key=lambda kv: kv[1]):
            if now - since < self.settings.idle_s or len(serving) <= self.settings.min_nodes:
                continue
            try:
                self.server.node_remove([node])
            except PoolError:
                continue
            serving.remove(node)
            del self._idle_since[node]
            self.server.record_event("pool_give_back", None, node=node,
                                     idle_s=round(now - since, 3))

    def _renew(self, st: dict[str, Any], states: dict[str, str],
               waiting: list[dict[str, Any]], now: float) -> None:
        """A busy node whose placeholder's walltime nearly ran out is replaced."""
        known = self.pool.placeholders()
        for p in known:
            if (p.state != "RUNNING" or p.left_s is None or p.slurm_job in self._renewing
                    or states.get(p.node or "") not in ("free", "busy")):
                continue
            margin = min(self.settings.renew_s, (p.full_s or p.left_s) / 2)
            if p.left_s - (now - p.polled) >= margin:
                continue
            self._renewing.add(p.slurm_job)
            replacement = None
            if (states.get(p.node or "") == "busy" or waiting) and \
                    len(known) < self.settings.max_nodes and self._slurm_ok(now):
                try:
                    replacement = self.pool.request()
                except SlurmError as exc:
                    self._failed(exc, "sbatch")
            self.server.record_event("pool_renew", None, slurm_job=p.slurm_job, node=p.node,
                                     left_s=p.left_s, replacement=replacement)
            try:
                self.server.node_remove([p.node or ""])
            except PoolError:
                pass

    def _grow(self, st: dict[str, Any], states: dict[str, str],
              waiting: list[dict[str, Any]]) -> None:
        """Placeholders up to MIN, and for a queue head that waited too long."""
        known = self.pool.placeholders()
        want = self.settings.min_nodes - len(known)
        if waiting:
            head = waiting[0]
            if st["now_s"] - head["submit_s"] >= self.settings.wait_s:
                free = [n for n in self.pool.joined() if states.get(n) == "free"]
                pending = [p for p in known if p.state != "RUNNING"]
                want = max(want, head["min_nodes"] - len(free) - len(pending))
        want = min(want, self.settings.max_nodes - len(known))
        for _ in range(max(0, want)):
            try:
                slurm_job = self.pool.request()
            except SlurmError as exc:
                self._failed(exc, "sbatch")
                return
            self.pool.failed(None)
            self.server.record_event("pool_request", None, slurm_job=slurm_job,
                                     waiting=[j["id"] for j in waiting[:1]])

    def _save(self) -> None:
        text = self.pool.to_json()
        if text != self._saved:
            self.server.set_journal_meta(META_KEY, text)
            self._saved = text
