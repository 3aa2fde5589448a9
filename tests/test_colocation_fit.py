"""The co-location study's model and fit (benchmarks/colocation.py; Xie 2026's
``T_N = T_1 (1 + beta (rho_N - rho_1))``), on hand-worked numbers: no processes, no timing."""

from __future__ import annotations

import math

import pytest

from benchmarks.colocation import fit, fit_beta, load, points, predicted_gain, table
from benchmarks.references import pick


def test_fit_beta_by_hand() -> None:
    # x = (1, 2), y = (0.5, 1.5): beta = (0.5 + 3) / (1 + 4) = 0.7; residuals -0.2, 0.1,
    # s^2 = 0.05 / (2 - 1), stderr = sqrt(0.05 / 5) = 0.1
    beta, se = fit_beta([1.0, 2.0], [0.5, 1.5])
    assert beta == pytest.approx(0.7)
    assert se == pytest.approx(0.1)
    beta, se = fit_beta([0.5], [0.25])  # one point: the line through it, no error left
    assert beta == pytest.approx(0.5) and se is None


@pytest.mark.parametrize("rise, slowdown", [([], []), ([0.0, 0.0], [0.1, 0.2]),
                                            ([1.0], [0.1, 0.2])])
def test_fit_beta_refuses(rise: list[float], slowdown: list[float]) -> None:
    with pytest.raises(ValueError):
        fit_beta(rise, slowdown)


def test_load_and_gain() -> None:
    # 3 jobs of 2 cores at 20 % on one 2-core node: rho = 3 x 0.4 / 2 = 0.6
    assert load(3, 2, 0.2, 1, 2) == pytest.approx(0.6)
    # T_3 = T_1 (1 + 0.5 (0.6 - 0.2)) = 1.2 T_1, so 3 jobs give 3 / 1.2 = 2.5x
    assert predicted_gain(3, 0.5, 0.6, 0.2) == pytest.approx(2.5)
    with pytest.raises(ValueError):
        load(1, 2, 0.5, 0, 2)


def test_points_and_fit_keep_the_control_out() -> None:
    def g(n: int, window: float, duty: float) -> dict[str, object]:
        return {"n": n, "window_s": window, "duty": duty, "gain": n * 1.0 / window,
                "correct": True}

    paced = {"label": "pause 20%", "kind": "pause",
             "groups": [g(1, 1.0, 0.2), g(2, 1.1, 0.2), g(3, 1.3, 0.2)]}
    control = {"label": "control", "kind": "control",
               "groups": [g(1, 1.0, 0.9), g(2, 2.0, 0.9)]}
    pts = points([paced, control], cores_per_job=2, cores=2)
    assert [(p["n"], p["waits"]) for p in pts] == [(2, True), (3, True), (2, False)]
    assert [p["rho_n"] for p in pts[:2]] == pytest.approx([0.4, 0.6])
    # rises 0.2, 0.4; slowdowns 0.1, 0.3: beta = (0.02 + 0.12) / (0.04 + 0.16) = 0.7
    f = fit(pts)
    assert f["beta"] == pytest.approx(0.7)
    assert f["beta_n2"] == pytest.approx(0.5)  # 0.1 / 0.2
    assert f["beta_by_kind"]["pause"][0] == pytest.approx(0.7)
    assert "control" not in f["beta_by_kind"]
    # N = 2: 2 / (1 + 0.7 x 0.2) = 1.7544 against 2 / 1.1 = 1.8182 measured: -3.5 %
    assert pts[0]["error_pct"] == pytest.approx(100 * (2 / 1.14 - 2 / 1.1) / (2 / 1.1))
    assert f["within_10pct"] is True
    # the control (no gain, 2 / 2.0 = 1x) gets a prediction but is not in the fit
    assert pts[2]["gain"] == pytest.approx(1.0) and math.isfinite(pts[2]["error_pct"])


def test_table_has_a_row_per_count() -> None:
    def g(n: int, window: float, duty: float) -> dict[str, object]:
        return {"n": n, "window_s": window, "duty": duty, "gain": n * 1.0 / window,
                "correct": True}

    levels = [{"label": "pause 20%", "kind": "pause",
               "groups": [g(1, 1.0, 0.2), g(2, 1.1, 0.2)]}]
    pts = points(levels, cores_per_job=2, cores=2)
    fit(pts)
    data = {"reference": pick("xie_colocation")["references"]["xie_colocation"],
            "levels": levels, "points": pts}
    rows = table(data).splitlines()
    assert rows[0] == "| N | Xie 2026 (duty 5-19 %) | Jacobi, pause 20%: duty 20% alone |"
    assert rows[2] == "| 1 | 1 | 1 (1.00 s) |"
    assert rows[3] == "| 2 | 1.77x | 1.82x (model 1.82x, +0 %) |"
