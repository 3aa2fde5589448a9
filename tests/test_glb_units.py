"""GLB policies and protocols as plain data, without processes."""

from __future__ import annotations

import pickle
import random

import pytest

from apgaspy import ConfigurationError
from glb import ArraySum, LongSum, process_all
from glb._config import glb_setting
from glb._lifeline import diameter, dimensions, lifeline_graph, lifelines, steal_victim


@pytest.mark.parametrize("n", range(1, 40))
@pytest.mark.parametrize("base", [2, 3, 32])
def test_lifeline_graph_is_connected_with_small_diameter(n, base):
    g = lifeline_graph(range(n), base)
    assert set(g) == set(range(n))
    z = dimensions(n, base)
    assert diameter(g) <= z * (base - 1)
    for p, buddies in g.items():
        assert p not in buddies and len(buddies) <= z
        assert len(set(buddies)) == len(buddies)


def test_lifeline_graph_follows_place_ids_after_shrink_and_grow():
    # places [0,1,3,4,5] (2 released, 4 and 5 added): same shape as 0..4, on those ids
    g = lifeline_graph([0, 1, 3, 4, 5], 2)
    h = lifeline_graph(range(5), 2)
    ids = [0, 1, 3, 4, 5]
    assert g == {ids[i]: [ids[j] for j in h[i]] for i in h}


def test_hypercube_lifelines_of_eight_places():
    assert [lifelines(i, 8, 2, 3) for i in range(8)][:4] == [[1, 2, 4], [0, 3, 5], [3, 0, 6],
                                                             [2, 1, 7]]


def test_steal_victim_is_never_the_thief():
    rng = random.Random(1)
    assert {steal_victim(2, [0, 1, 2, 3], rng) for _ in range(200)} == {0, 1, 3}
    assert steal_victim(0, [0], rng) is None


def test_glb_settings(monkeypatch):
    monkeypatch.delenv("GLB_W", raising=False)
    assert glb_setting("W") == 1
    monkeypatch.setenv("GLB_W", "4")
    assert glb_setting("W") == 4
    assert glb_setting("W", 2) == 2
    monkeypatch.setenv("GLB_L", "1")
    with pytest.raises(ConfigurationError, match="GLB_L"):
        glb_setting("L")


def test_folds():
    a = LongSum(3)
    a.fold(LongSum(4))
    assert a.value() == 7 and pickle.loads(pickle.dumps(a)).value() == 7
    x = ArraySum(3)
    x.fold(ArraySum(pickle.loads(pickle.dumps(ArraySum(3).array + 1))))
    assert x.value().tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError):
        a.fold(x)
    with pytest.raises(TypeError):
        x.fold(ArraySum(4))


def test_process_all_rejects_bad_n():
    from benchmarks.kernels.uts import UTSBag

    with pytest.raises(ValueError):
        process_all(UTSBag(19, 2), LongSum(), 0)
    assert process_all(UTSBag(19, 2), LongSum(), 7).value() == 65


def test_heirs_spread_over_the_continuing_places():
    from glb._lifeline import heir

    # places 4 and 5 leave; 0..3 continue: the heirs differ and are continuing places
    assert heir(4, [0, 1, 2, 3]) == 0 and heir(5, [0, 1, 2, 3]) == 1
    assert heir(3, [0, 3]) == 0  # itself is never its heir
    assert heir(2, []) == 0
