"""Every interval stays within what its score can be (probes.results.intervals: ``clip``): each head's, the best head's
(its contenders' bound), each head's and the best head's margin over the best offset baseline, a --select-on head's,
what every view shows (``ProbeResult.reported``), the paired change between two results (``paired_delta``, which
`probes compare` and a study's study-deltas.csv print), for scores of every kind (binomial, bounded, and a mean
with a declared range). A margin's or a change's range is the difference of the two ranges: [-1, 1] for two shares.

Property-based (hypothesis): random per-sentence counts and hits reweighted by the bootstrap's own Poisson weights,
and arbitrary replicate scores within the range (NaN where a replicate has no instance).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.results.bootstrap import replicate_weights
from probes.results.fitting import choose_heads
from probes.results.intervals import SCORE_RANGES, attach_interval, difference_range, paired_delta, record_range
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

PROPERTY = settings(max_examples=150, deadline=None, database=None)
EPSILON = 0.0  # no tolerance: the bounds are clipped exactly to the range


def _info(replicates: int) -> RunInfo:
    return RunInfo(model="hand", corpus=["hand"], layers=2, heads=3, sentences=5, skipped={},
                   settings={"replicates": replicates, "bootstrap_seed": 0}, provenance={})


def _within(values, bounds, what: str) -> None:
    values = np.asarray(values, dtype=float)
    finite = values[~np.isnan(values)]
    assert (finite >= bounds[0] - EPSILON).all() and (finite <= bounds[1] + EPSILON).all(), (what, bounds, values)


def _check_entry(entry: LabelScores, bounds, margins: bool) -> None:
    """Every interval an entry holds lies in `bounds`, every margin's in their difference."""
    _within(entry.ci_low, bounds, "head low")
    _within(entry.ci_high, bounds, "head high")
    _within([entry.best.ci_low, entry.best.ci_high], bounds, "best head")
    if margins:
        margin_range = difference_range(bounds)
        _within(entry.margins["margin_low"], margin_range, "head margin low")
        _within(entry.margins["margin_high"], margin_range, "head margin high")
        _within([entry.best.margin_low, entry.best.margin_high], margin_range, "best margin")


@st.composite
def counted(draw, r: int):
    """A label counted over S sentences: hits [S,L,H] ≤ instances [S], offsets' hits [S,K] ≤ instances, and the
    replicate ratios of R bootstrap replicates (Poisson weights of the sentences' keys): (scores [L,H], replicates
    [R,L,H], count, offsets' scores [K], offsets' replicates [R,K])."""
    s = draw(st.integers(1, 25))
    seed = draw(st.integers(0, 2 ** 32))
    instances = np.array(draw(st.lists(st.integers(0, 6), min_size=s, max_size=s)), dtype=float)  # [S]
    if not instances.sum():
        instances[0] = 1
    share = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), min_size=6, max_size=6))).reshape(2, 3)
    rng = np.random.default_rng(seed)
    hits = rng.binomial(instances.astype(int)[:, None, None], share[None]).astype(float)  # [S,2,3]
    offsets = rng.binomial(instances.astype(int)[:, None], rng.uniform(0, 1, 3)[None]).astype(float)  # [S,K=3]
    w = replicate_weights(list(range(seed, seed + s)), r, seed).astype(float)  # [R,S]
    counts = w @ instances  # [R]
    with np.errstate(invalid="ignore", divide="ignore"):
        replicates = np.einsum("rs,slh->rlh", w, hits) / counts[:, None, None]  # [R,2,3] NaN where a count is 0
        base = (w @ offsets) / counts[:, None]  # [R,3]
    total = instances.sum()
    return hits.sum(0) / total, replicates, int(total), offsets.sum(0) / total, base


@st.composite
def arbitrary(draw, low: float = 0.0, high: float = 1.0):
    """Scores [2,3] and replicates [R,2,3] anywhere in [low, high] (NaN replicates among them), offsets' scores [3]
    and replicates [R,3] likewise: no corpus need give them, the intervals must still stay in the range."""
    r = draw(st.integers(2, 40))
    value = st.floats(low, high, allow_nan=False)
    scores = np.array(draw(st.lists(value, min_size=6, max_size=6))).reshape(2, 3)
    replicates = np.array(draw(st.lists(value | st.just(np.nan), min_size=6 * r, max_size=6 * r))).reshape(r, 2, 3)
    points = np.array(draw(st.lists(value, min_size=3, max_size=3)))
    base = np.array(draw(st.lists(value, min_size=3 * r, max_size=3 * r))).reshape(r, 3)
    return scores, replicates, draw(st.integers(1, 500)), points, base


def _result(scores, replicates, count, points, base, kind: str, bounds, margins: bool = True) -> ProbeResult:
    """A result of one label "x" and overall, each with its intervals (and margins over the offsets) attached."""
    entries = {name: LabelScores(count=count, scores=scores.copy()) for name in ("x", "overall")}
    result = ProbeResult("hand", _info(len(replicates)), {}, {"x": entries["x"]}, entries["overall"],
                         baselines={"labels": {"x": {"best": float(points.max()), "best_offset": 1}},
                                    "overall": {"best": float(points.max()), "best_offset": 1}} if margins else {})
    for name, entry in entries.items():
        result.replicates[name] = attach_interval(entry, replicates, kind, (points, base) if margins else None,
                                                  bounds=bounds)
    record_range(result, bounds)
    return result


def _check_result(result: ProbeResult, other: ProbeResult, bounds, margins: bool = True) -> None:
    for name in ("x", "overall"):
        _check_entry(result.entry(name), bounds, margins)
        shown = result.reported(name)
        _within([shown.ci_low, shown.ci_high], bounds, "reported")
        if margins:
            _within([shown.margin_low, shown.margin_high], difference_range(bounds), "reported margin")
        _, low, high = paired_delta(result, other, name)
        _within([low, high], difference_range(bounds, other.score_range(name)), "paired")
    choose_heads(result, other)  # --select-on: the other result as the selection split
    for name in ("x", "overall"):
        if "reason" not in result.entry(name).selected:
            shown = result.reported(name, "selected")
            _within([shown.ci_low, shown.ci_high], bounds, "selected")
            if margins:
                _within([shown.margin_low, shown.margin_high], difference_range(bounds), "selected margin")


@PROPERTY
@given(st.integers(2, 60).flatmap(lambda r: st.tuples(counted(r), counted(r))), st.sampled_from(["binomial", "bounded"]))
def test_counted_shares_stay_in_0_1(pair, kind):
    """Two corpora's counts, bootstrapped with the same number of replicates (as two runs that pair)."""
    a, b = pair
    one, two = (_result(*x, kind, SCORE_RANGES[kind]) for x in (a, b))
    _check_result(one, two, (0.0, 1.0))


@PROPERTY
@given(arbitrary(), st.sampled_from(["binomial", "bounded"]))
def test_any_replicates_of_shares_stay_in_0_1(a, kind):
    scores, replicates, count, points, base = a
    one = _result(*a, kind, SCORE_RANGES[kind])
    two = _result(scores[::-1], replicates[:, ::-1], count, points[::-1], base[:, ::-1], kind, SCORE_RANGES[kind])
    _check_result(one, two, (0.0, 1.0))


@PROPERTY
@given(arbitrary(0.0, 7.0))
def test_a_mean_with_a_declared_range_stays_in_it(a):
    """A mean in [0, ∞) (entropy in nats): no interval below 0, none bounded above; a change within (-∞, ∞)."""
    scores, replicates, count, points, base = a
    bounds = (0.0, np.inf)
    one = _result(*a, "mean", bounds, margins=False)
    two = _result(scores[::-1], replicates[:, ::-1], count, points, base, "mean", bounds, margins=False)
    _check_result(one, two, bounds, margins=False)
    assert one.score_range("overall") == bounds and one.to_json()["score_range"] == {"*": [0.0, None]}


def test_the_contenders_bound_is_clipped_at_0():
    """A best head at 0.437 whose contender's replicate ran 0.917 above its score (a few documents): the contenders'
    bound, 0.437 − 0.917 = −0.480 unclipped, is 0; the margin's bound −1 at the least."""
    scores = np.array([[0.437, 0.05]])
    replicates = np.array([[[0.437, 0.05]], [[0.5, 0.967]], [[0.4, 0.0]], [[0.45, 0.967]]])  # [R=4,1,2]
    entry = LabelScores(count=71, scores=scores)
    attach_interval(entry, replicates, "binomial", (np.array([0.3, 0.2]), np.array([[0.3, 0.2]] * 4)))
    assert entry.best.ci_low == 0.0 and entry.best.ci_high <= 1.0
    assert entry.best.margin_low >= -1.0 and entry.margins["margin_low"].min() >= -1.0


def test_score_range_of_results_without_a_declaration():
    """Results written before the declaration: [0, 1] where every interval is of a share, else no bound."""
    result = ProbeResult("hand", _info(0), {}, {}, LabelScores(count=1, scores=np.zeros((2, 3))))
    assert result.score_range() == (-np.inf, np.inf)
    result.extra["interval_method"] = {"per_head": {"overall": "bounded: ...", "labels": "binomial: ..."}}
    assert result.score_range("x") == (0.0, 1.0)
    result.extra["score_range"] = {"*": [0, None], "confidence": [0, 1]}
    assert result.score_range("overall") == (0.0, np.inf) and result.score_range("confidence") == (0.0, 1.0)
    assert ProbeResult.from_json(result.to_json()).score_range("confidence") == (0.0, 1.0)


@pytest.mark.parametrize("n, unit, note", [
    (3, "document", "the bootstrap resampled only 3 documents (fewer than 20): its 95% intervals are rough"),
    (1, "sentence", "the bootstrap resampled only 1 sentence (fewer than 20): its 95% intervals are rough"),
    (20, "sentence", None)])
def test_few_units_are_said_and_marked(n, unit, note):
    """Fewer than 20 resampled units: the JSON records the units and the note, the table marks each interval ~
    and says why below it; 20 or more, or no intervals: nothing."""
    from probes.tools.show import format_table

    scores = np.array([[0.5, 0.25, 0.0], [0.0, 0.0, 0.0]])
    replicates = np.stack([scores + d for d in (-0.1, 0.0, 0.1)])
    result = _result(scores, replicates, 40, np.array([0.1, 0.2, 0.3]), np.full((3, 3), 0.2), "binomial", (0, 1))
    result.info.units, result.info.unit = n, unit
    data = result.to_json()
    assert data["bootstrap_units"] == {"count": n, "unit": unit} and data.get("few_units") == note
    back = ProbeResult.from_json(data)
    assert (back.info.units, back.info.unit, back.few_units()) == (n, unit, note)
    table = format_table(result).splitlines()
    rows = [line for line in table if line.startswith(("x ", "overall"))]
    assert all(("~[" in line) == bool(note) for line in rows), table
    assert (f"~ {note}" in table) == bool(note)
    plain = _result(scores, replicates, 40, np.array([0.1]), np.full((3, 1), 0.2), "binomial", (0, 1))
    plain.info.units = n
    for entry in (plain.overall, plain.labels["x"]):
        entry.ci_low = entry.ci_high = entry.best = None
    assert plain.few_units() is None


@pytest.mark.integration
def test_three_litbank_documents_stay_in_range_and_warn(minilm, shared_corpora, tmp_path, capsys):
    """`probes run coref` on 3 full LitBank documents (windows of MiniLM's 512 subwords; the bootstrap resamples the
    3 documents): one warning line on stderr naming the 3 documents, recorded in the JSON; every interval of the
    JSON and of the printed table within [0, 1], every margin's within [-1, 1], each marked ~ with the legend."""
    import re

    from probes.cli import main

    documents = sorted((shared_corpora / "litbank-coref").glob("*.conll"))[:3]
    out = tmp_path / "out"
    assert main(["run", "coref", *[x for d in documents for x in ("--corpus", str(d))], "--out", str(out),
                 "--no-plots", "--quiet", "--replicates", "200"]) == 0
    captured = capsys.readouterr()
    note = "the bootstrap resampled only 3 documents (fewer than 20): its 95% intervals are rough"
    assert captured.err.count("warning") == 1 and f"coref: {note}" in captured.err
    data = json.loads((out / "coref.json").read_text(encoding="utf-8"))
    assert data["bootstrap_units"] == {"count": 3, "unit": "document"} and data["few_units"] == note
    assert data["sentences"] > 3 and data["score_range"] == {"*": [0.0, 1.0]}
    for name, entry in [*data["labels"].items(), ("overall", data["overall"])]:
        _within(entry["ci_low"], (0, 1), name)
        _within(entry["ci_high"], (0, 1), name)
        best = entry.get("best")
        if best:
            _within([best["ci_low"], best["ci_high"]], (0, 1), name)
            _within([best["margin_low"], best["margin_high"]], (-1, 1), name)
    assert main(["show", str(out / "coref.json"), "--all-labels"]) == 0
    table = capsys.readouterr().out.splitlines()
    bounds = [(float(a), float(b)) for line in table for a, b in re.findall(r"~\[([-+0-9.]+), ([-+0-9.]+)\]", line)]
    assert bounds and all(-1 <= a <= b <= 1 for a, b in bounds)
    score_bounds = [(float(a), float(b)) for line in table for a, b in re.findall(r"~\[([0-9.]+), ([0-9.]+)\]", line)]
    assert score_bounds and all(0 <= a <= b <= 1 for a, b in score_bounds)
    assert f"~ {note}" in table and not any(re.search(r"(?<![~\w])\[[-+]?[0-9.]+, ", line) for line in table)
