"""probes correlate: permutation p-values and the correction over labels, checked against independent computations."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from probes.cli import main
from probes.tools.compare.correlate import adjust_p_values, correlate, permutation_spearman
from probes.base.errors import InputError
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo


def _result(labels: dict[str, np.ndarray]) -> ProbeResult:
    shape = next(iter(labels.values())).shape
    info = RunInfo("hand", ["hand"], shape[0], shape[1], 1, {}, {}, {})
    overall = LabelScores(count=10, scores=np.mean(list(labels.values()), axis=0))
    return ProbeResult(probe="dep", info=info, options={}, labels={k: LabelScores(10, v) for k, v in labels.items()},
                       overall=overall)


def test_holm_and_benjamini_hochberg_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.20])
    # Holm: sorted 0.01, 0.03, 0.04, 0.20 times 4, 3, 2, 1 = 0.04, 0.09, 0.08, 0.20; running max 0.04, 0.09, 0.09, 0.20
    np.testing.assert_allclose(adjust_p_values(p, "holm"), [0.04, 0.09, 0.09, 0.20])
    # BH: sorted times 4/1, 4/2, 4/3, 4/4 = 0.04, 0.06, 0.0533, 0.20; running min from the end 0.04, 0.0533, 0.0533, 0.2
    np.testing.assert_allclose(adjust_p_values(p, "bh"), [0.04, 0.16 / 3, 0.16 / 3, 0.20])
    np.testing.assert_array_equal(adjust_p_values(p, "none"), p)
    assert adjust_p_values(np.array([0.5, 0.9]), "holm").tolist() == [1.0, 1.0]  # capped at 1


def test_permutation_p_value_against_full_enumeration():
    # 6 heads: every one of the 720 orders of x scored by scipy gives the exact two-sided p-value
    x = np.array([0.1, 0.5, 0.2, 0.9, 0.7, 0.3])
    y = np.array([0.2, 0.4, 0.4, 0.8, 0.3, 0.1])  # a tie in y: average ranks
    rho_exact = spearmanr(x, y).statistic
    null = np.array([spearmanr(np.array(order), y).statistic for order in itertools.permutations(x)])
    p_exact = np.mean(np.abs(null) >= abs(rho_exact) - 1e-12)
    rho, p = permutation_spearman(x, y, 20000, np.random.default_rng(1))
    assert rho == pytest.approx(rho_exact, abs=1e-12)
    assert p == pytest.approx(p_exact, abs=0.01)  # Monte Carlo standard error ≤ 0.0036
    assert 0.05 < p_exact < 0.5


def test_table_counts_the_tests_and_is_seeded():
    rng = np.random.default_rng(0)
    labels = {"a": rng.random((2, 4)), "b": rng.random((2, 4)), "flat": np.ones((2, 4))}
    table = correlate(rng.random((2, 4)), _result(labels), permutations=999).set_index("label")
    # "flat" is constant: no ρ, not a test; a, b and overall are the 3 tests corrected together
    assert np.isnan(table.loc["flat", "spearman"]) and (table["tests"] == 3).all() and table.attrs["tests"] == 3
    assert not table.loc["flat", "significant"]
    again = correlate(np.ones((2, 4)), _result(labels), permutations=999)
    assert np.isnan(again["spearman"]).all() and (again["tests"] == 0).all()  # a constant grid: nothing tested
    grid = np.arange(8.0).reshape(2, 4)
    one, two = (correlate(grid, _result(labels), permutations=999, seed=5) for _ in range(2))
    pd.testing.assert_frame_equal(one, two)
    holm = one.set_index("label")
    np.testing.assert_allclose(holm["p_adjusted"].dropna(), adjust_p_values(holm["p_value"].dropna().to_numpy(), "holm"))


def test_too_few_permutations_are_refused():
    labels = {"a": 3 * np.arange(8.0).reshape(2, 4), "b": -np.arange(8.0).reshape(2, 4)}  # overall: their mean
    grid = np.arange(8.0).reshape(2, 4) ** 2
    # 3 tests at α = 0.05: the smallest p-value 1 / (N + 1) must reach 0.05 / 3, so N ≥ 59
    with pytest.raises(InputError, match="50 permutations cannot reach the corrected threshold α / 3 = 0.0167.*at "
                                         "least 59"):
        correlate(grid, _result(labels), permutations=50)
    correlate(grid, _result(labels), permutations=59)
    table = correlate(grid, _result(labels), permutations=60)
    # a and the overall grid rank the heads as the grid does, b in reverse: ρ = ±1, and no shuffle of 8 heads
    # among these 60 reaches |ρ| = 1 (each does with chance 2 / 8!): p = 1/61, Holm 3/61
    assert table["spearman"].tolist() == pytest.approx([1.0, -1.0, 1.0])
    assert table["p_adjusted"].tolist() == pytest.approx([3 / 61] * 3) and table["significant"].all()
    with pytest.raises(InputError, match="unknown correction 'bonferroni'"):
        correlate(grid, _result(labels), correction="bonferroni")


@pytest.fixture(scope="module")
def ewt_dep(minilm):
    import probes

    return probes.run("dep", encoder=minilm, limit=200, progress=False)["dep"]  # the bundled EWT sample


@pytest.mark.slow
def test_random_grids_find_nothing_after_correction(ewt_dep):
    # 20 seeded random 6 × 12 grids against every dep label (32 tests: 31 relations and overall): uncorrected,
    # several grids have a "significant" row (as issue 12's example, ρ = −0.264, p = 0.025; 6 of these 20);
    # after Holm at most 1 of 20 (family-wise error ≤ 5%; here seed 2, conj ρ = −0.362, p = 0.001)
    tests = len(ewt_dep.labels) + 1
    any_raw, any_holm = 0, 0
    for seed in range(20):
        grid = np.random.default_rng(seed).random((6, 12))
        table = correlate(grid, ewt_dep, seed=seed, permutations=2000)  # ≥ tests / α = 640
        assert table.attrs["tests"] == tests
        any_raw += bool((table["p_value"] <= 0.05).any())
        any_holm += bool(table["significant"].any())
    assert any_raw >= 5 and any_holm <= 1


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_a_planted_correlation_stays_significant(ewt_dep, correction):
    scores = ewt_dep.labels["nsubj"].scores
    grid = scores + np.random.default_rng(0).normal(0, 0.01 * scores.std(), scores.shape)
    table = correlate(grid, ewt_dep, correction=correction).set_index("label")
    assert table.loc["nsubj", "spearman"] > 0.9 and table.loc["nsubj", "significant"]
    assert table.loc["nsubj", "p_adjusted"] <= 0.05


def test_cli_says_what_it_corrected_for(tmp_path, capsys):
    rng = np.random.default_rng(3)
    r = _result({"a": rng.random((2, 3)), "b": rng.random((2, 3))})
    r.save(tmp_path / "res")
    np.save(tmp_path / "g.npy", rng.random((2, 3)))
    out = tmp_path / "c.csv"
    assert main(["correlate", str(tmp_path / "g.npy"), str(tmp_path / "res"), "--correction", "bh",
                 "--permutations", "999", "--seed", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(999 shuffles of the heads, seed 2); Benjamini–Hochberg correction over 3 tests: 0 significant" in printed
    written = pd.read_csv(out)
    assert (written["tests"] == 3).all() and (written["correction"] == "bh").all()
    assert main(["correlate", str(tmp_path / "g.npy"), str(tmp_path / "res"), "--permutations", "10"]) == 2
    assert "10 permutations cannot reach" in capsys.readouterr().err
