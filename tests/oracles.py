"""Independent reference implementations the tests compare against."""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["py_brandes"]


def py_brandes(n: int, src, dst) -> np.ndarray:
    """Brandes (2001) on a directed multigraph, parallel edges counted separately."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(list(src), list(dst), strict=True):
        adj[int(u)].append(int(v))
    bc = [0.0] * n
    for s in range(n):
        sigma = [0.0] * n
        dist = [-1] * n
        sigma[s] = 1.0
        dist[s] = 0
        order = []
        queue = deque([s])
        while queue:
            v = queue.popleft()
            order.append(v)
            for w in adj[v]:
                if dist[w] < 0:
                    dist[w] = dist[v] + 1
                    queue.append(w)
                if dist[w] == dist[v] + 1:
                    sigma[w] += sigma[v]
        delta = [0.0] * n
        for v in reversed(order):
            for w in adj[v]:
                if dist[w] == dist[v] + 1:
                    delta[v] += sigma[v] / sigma[w] * (1.0 + delta[w])
            if v != s:
                bc[v] += delta[v]
    return np.array(bc)
