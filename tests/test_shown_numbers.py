"""What is printed, drawn and reported is what was computed: for every registered probe, on a small real corpus
(tests/probe_corpora.py) with the packaged MiniLM, with and without ``select_on``, each view's shown head, score,
interval and margin equals the JSON's value for that head, worked out here from the JSON file itself (not
through ``ProbeResult.reported``): the table ``probes run`` prints, ``probes show``, the CSV's row of that head,
the HTML report's embedded data and the text chunk of every PNG. Every printed score lies in its printed interval,
or its row is marked * and a line under the table says why."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from probe_corpora import CORPORA, probe_run_arguments, selection_split

import probes
from probes.cli import main
from probes.tools.report import build_report
from probes.results.figures import save_result
from probes.base.files import safe_name
from probes.tools.show import format_table

pytestmark = pytest.mark.integration
REPLICATES = 200
NUMBER = r"-?\d+\.\d{3}|nan"
ROW = re.compile(rf"^(?P<label>.+?)\s+(?P<count>\d+)  "
                 rf"(?:(?P<head>L\d+-H\d+)\s+(?P<score>{NUMBER})(?:\s+(?P<sel>{NUMBER}))?"
                 rf"(?:\s+(?:(?P<rough>~)?\[(?P<low>{NUMBER}), (?P<high>{NUMBER})\](?P<star>\*)?|-))?"
                 r"(?:\s+(?:offset (?P<offset>[+-]\d+)|(?P<kind>[a-z_]+))\s+(?P<base>-?\d+\.\d{3})"  # coref: a kind
                 r"\s+(?P<margin>[+-]\d+\.\d{3})"
                 r"(?:\s+(?:(?P<mrough>~)?\[(?P<mlow>[+-]\d+\.\d{3}), (?P<mhigh>[+-]\d+\.\d{3})\]|-))?)?"
                 r"|no best head: (?P<why>.+?))(?P<few>  \(few\))?$")  # (few): below the run's --min-count


@pytest.fixture(scope="module")
def folders(minilm, shared_corpora, tmp_path_factory):
    """{"plain" | "selected": results folder}: every probe run once on its corpus, and once more choosing its
    heads on a second excerpt (probe_corpora.selection_split); each saved with a heatmap per label."""
    root = tmp_path_factory.mktemp("shown")
    out = {"plain": root / "plain", "selected": root / "selected"}
    bundled = [n for n in probes.available() if n not in CORPORA]  # read together; every other probe alone
    for names in [bundled, *([n] for n in probes.available() if n in CORPORA)]:
        tmp = root / names[0]
        tmp.mkdir()
        arguments = probe_run_arguments(names[0], tmp, lambda: shared_corpora)
        for mode, folder in out.items():
            select = {"select_on": selection_split(names[0], tmp, lambda: shared_corpora)} if mode == "selected" else {}
            results = probes.run(names, encoder=minilm, progress=False, views=0, replicates=REPLICATES,
                                 **arguments, **select)
            for name, result in results.items():
                save_result(result, folder, plots="labels")
                (folder / f"{name}.printed.txt").write_text(format_table(result, all_labels=True), encoding="utf-8")
    return out


def expected(data: dict) -> dict[str, dict]:
    """label → what every view must show of it, from the results JSON alone: the selected head (its grid interval
    unless its ``selected`` block records one; its margin over the label's best baseline) or the ``best`` block
    (the grid's single top head where the run kept no replicates)."""
    out = {}
    baselines = data.get("baselines") if isinstance(data.get("baselines"), dict) else {}
    for label, entry in [*data["labels"].items(), ("overall", data["overall"])]:
        base = (baselines.get("overall") if label == "overall" else baselines.get("labels", {}).get(label)) or {}
        grid = np.array(entry["scores"], dtype=float)
        chosen, best = entry.get("selected"), entry.get("best")
        shown = {"label": label, "count": entry["count"], "kind": "best" if chosen is None else "selected",
                 "baseline": base.get("best"), "offset": base.get("best_offset")}
        if chosen is not None and "layer" in chosen:
            at = (chosen["layer"], chosen["head"])
            score = grid[at]
            assert score == chosen["score_on_corpus"]
            cell = {k: entry[k][at[0]][at[1]] if k in entry else None for k in ("ci_low", "ci_high")}
            shown |= {"layer": at[0], "head": at[1], "score": score, "selection_score": chosen["score_on_selection"],
                      "ci_low": chosen.get("ci_low", cell["ci_low"]), "ci_high": chosen.get("ci_high", cell["ci_high"]),
                      "margin": chosen.get("margin", None if base.get("best") is None else score - base["best"]),
                      "margin_low": chosen.get("margin_low"), "margin_high": chosen.get("margin_high")}
        elif chosen is not None or not np.isfinite(grid).any():
            shown |= {"layer": None, "head": None}
        elif best is not None:
            shown |= {k: best[k] for k in ("layer", "head", "score", "ci_low", "ci_high", "margin", "margin_low",
                                            "margin_high")}
            if shown["margin"] is None and base.get("best") is not None:
                shown["margin"] = best["score"] - base["best"]
        else:
            top = np.nanmax(grid)
            heads = np.argwhere(grid == top)
            single = len(heads) == 1 and top != 0
            shown |= {"layer": int(heads[0][0]) if single else None, "head": int(heads[0][1]) if single else None,
                      "score": top, "ci_low": None, "ci_high": None, "margin_low": None, "margin_high": None,
                      "margin": None if base.get("best") is None else top - base["best"]}
        out[label] = shown
    return out


def fixed(x: float | None, spec: str = ".3f") -> str | None:
    """`x` as the tables print it: to `spec`, never a negative zero."""
    return None if x is None else format(0.0 if float(format(x, spec)) == 0 else x, spec)


def check_table(text: str, data: dict, where: str) -> int:
    """Every row of a printed table against the JSON (to the printed precision); returns the rows checked."""
    want = expected(data)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line) == {"-"}) + 1
    end = next(i for i, line in enumerate(lines) if i >= start and line.startswith("overall "))
    rows = lines[start:end + 1]  # the labels, then overall
    starred = False
    for line in rows:
        row = ROW.match(line)
        assert row, (where, line)
        shown = want[row["label"]]
        assert int(row["count"]) == shown["count"], (where, line)
        rare = row["label"] != "overall" and shown["count"] < (data["settings"].get("min_count") or 0)
        assert bool(row["few"]) == rare, (where, line)
        if row["why"]:
            assert shown["layer"] is None, (where, line, shown)
            continue
        assert row["head"] == f"L{shown['layer']}-H{shown['head']}", (where, line, shown)
        assert row["score"] == fixed(shown["score"]), (where, line, shown)
        if shown["kind"] == "selected":
            assert row["sel"] == fixed(shown["selection_score"]), (where, line, shown)
        assert (row["low"], row["high"]) == (fixed(shown["ci_low"]), fixed(shown["ci_high"])), (where, line, shown)
        if row["low"] is not None:  # ~: the bootstrap resampled few units, as the JSON says
            assert bool(row["rough"]) == ("few_units" in data), (where, line)
            inside = float(row["low"]) <= float(row["score"]) <= float(row["high"])
            assert inside or row["star"], (where, line)
            starred |= bool(row["star"])
        if shown["baseline"] is not None:
            named = row["offset"] or row["kind"]  # an offset (+1), or a baseline's kind (coref's head_match)
            assert (named, row["base"]) == (f"{shown['offset']:+d}" if isinstance(shown["offset"], int)
                                            else shown["offset"], fixed(shown["baseline"])), (where, line)
            assert row["margin"] == fixed(shown["margin"], "+.3f"), (where, line, shown)
            assert row["mlow"] is None or bool(row["mrough"]) == ("few_units" in data), (where, line)
            assert (row["mlow"], row["mhigh"]) == (fixed(shown["margin_low"], "+.3f"),
                                                    fixed(shown["margin_high"], "+.3f")), (where, line, shown)
        else:
            assert row["offset"] is None and row["kind"] is None, (where, line)
    assert starred == any(line.startswith("* the score lies outside its interval") for line in lines), (where, text)
    assert (f"~ {data.get('few_units')}" in lines) == ("few_units" in data and any(ROW.match(x)["low"] for x in rows)), \
        (where, text)
    assert sorted(ROW.match(line)["label"] for line in rows) == sorted([*data["labels"], "overall"]), where
    return len(rows)


def same(value, want, where) -> None:
    """A view's number against the JSON's: equal (both None, or within float32's share of the JSON's value)."""
    if want is None or value is None:
        assert value is None and (want is None or want != want), where
    else:
        assert value == pytest.approx(want, rel=1e-12, abs=1e-12), where


@pytest.fixture(scope="module", params=["plain", "selected"])
def mode(request, folders):
    return request.param, folders[request.param]


def test_printed_table_and_show(mode, capsys):
    name, folder = mode
    checked = 0
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if name == "selected":
            assert "select_on" in data["settings"], path
        checked += check_table((folder / f"{data['probe']}.printed.txt").read_text(), data, f"run table {path.name}")
        capsys.readouterr()
        assert main(["show", str(path), "--sentences", "0", "--all-labels"]) == 0
        checked += check_table(capsys.readouterr().out, data, f"probes show {path.name}")
    assert checked >= 2 * len(probes.available())


def test_csv_rows_of_the_shown_heads(mode):
    _, folder = mode
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        table = pd.read_csv(path.with_suffix(".csv"), keep_default_na=False, na_values=[""])
        for label, shown in expected(data).items():
            if shown["layer"] is None:
                continue
            row = table[(table["label"].astype(str) == label) & (table["layer"] == shown["layer"])
                        & (table["head"] == shown["head"])]
            assert len(row) == 1, (path.name, label)
            same(float(row["score"].iloc[0]), shown["score"], (path.name, label))
            if shown["kind"] == "selected" and shown["ci_low"] is not None:  # a selected head's own interval
                same(float(row["ci_low"].iloc[0]), shown["ci_low"], (path.name, label))
                same(float(row["ci_high"].iloc[0]), shown["ci_high"], (path.name, label))


KEYS = {"l": "layer", "h": "head", "v": "score", "kind": "kind", "low": "ci_low", "high": "ci_high",
        "margin": "margin", "margin_low": "margin_low", "margin_high": "margin_high"}


def test_report_data(mode):
    _, folder = mode
    html = build_report([folder])
    payload = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)[1])
    (model,) = payload["models"]
    assert set(model["probes"]) == {json.loads(p.read_text())["probe"] for p in folder.glob("*.json")}
    for probe, shown_probe in model["probes"].items():
        want = expected(json.loads((folder / f"{probe}.json").read_text()))
        for label in [*shown_probe["labels"], shown_probe["overall"]]:
            shown, best = want[label["name"]], label["best"]
            assert best["kind"] == shown["kind"], (probe, label["name"])
            if shown["layer"] is None:
                assert "why" in best, (probe, label["name"])
                continue
            for key, field in KEYS.items():
                if key != "kind":
                    same(best[key], shown[field], (probe, label["name"], key))


def test_png_text_chunks(mode):
    _, folder = mode
    pictures = 0
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        want = expected(data)
        names = [f"{data['probe']}.png", *(f"{data['probe']}-{safe_name(label)}.png" for label in want)]
        assert (folder / names[0]).is_file(), names[0]
        for png in [folder / n for n in names if (folder / n).is_file()]:  # the overview, a heatmap per label
            shown = json.loads(Image.open(png).text["probes"])
            assert shown, png.name
            for tile in shown:
                wanted = want[tile["label"]]
                assert tile["kind"] == wanted["kind"], (png.name, tile["label"])
                assert (tile["layer"], tile["head"]) == (wanted["layer"], wanted["head"]), (png.name, tile["label"])
                if wanted["layer"] is None:
                    continue
                for field in ("score", "ci_low", "ci_high", "margin", "margin_low", "margin_high"):
                    same(tile[field], wanted[field], (png.name, tile["label"], field))
            pictures += 1
    assert pictures > len(probes.available())
