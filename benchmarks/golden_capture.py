"""Golden capture: every number of every registered probe on small real data, to check a refactor changes none.

    python benchmarks/golden_capture.py OUT.npz            # capture (a few minutes on 2 cores)
    python benchmarks/golden_capture.py --compare A.npz B.npz

Every probe of ``probes list`` runs with the packaged MiniLM on its corpus of tests/probe_corpora.py (the
bundled EWT sample, or excerpts of ../shared/corpora), bootstrap replicates on, once plainly, once choosing
its heads on a second excerpt (``select_on``), and dep once more with the norm-based maps; dep also runs on
the tiny random checkpoint of every family of tests/tiny_models.py, and is ablated (two masks) on MiniLM. Every value of every result is kept:
the results JSON but its provenance (times, versions), the bootstrap replicates at full precision, and the
offset-baseline margins. ``--compare`` prints how many values differ (bit for bit, NaN equal to NaN) and
where; it exits 1 when any does.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
TESTS = Path(__file__).resolve().parents[1] / "tests"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpora"
REPLICATES = 50
LEFT_OUT = ("provenance", "version")  # times and versions: differ between any two runs


def flatten(value, key: str, out: dict[str, np.ndarray]) -> None:
    """Every leaf of a JSON-like value under its path: numbers (and rectangular number lists) as float64 or
    int64 arrays, anything else as its JSON text."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{key}/{k}", out)
        return
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) and not isinstance(value[0], (dict, str)):
        try:
            array = np.asarray(value)
        except ValueError:
            array = None
        if array is not None and array.dtype.kind in "fiub":
            out[key] = array
            return
        if array is not None and array.dtype == object and all(v is None or isinstance(v, (int, float))
                                                                 for v in array.ravel()):
            out[key] = np.array([np.nan if v is None else v for v in array.ravel()], float).reshape(array.shape)
            return
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
        for i, v in enumerate(value):
            flatten(v, f"{key}[{i}]", out)
        return
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        out[key] = np.asarray(value)
        return
    out[key] = np.asarray(json.dumps(value, sort_keys=True, default=str))


def keep(result, key: str, out: dict[str, np.ndarray]) -> None:
    data = {k: v for k, v in result.to_json().items() if k not in LEFT_OUT}
    data.pop("replicates", None)  # float32 in the JSON: kept at full precision below
    flatten(data, key, out)
    for label, values in result.replicates.items():
        out[f"{key}/replicates/{label}"] = np.asarray(values)
    for label, entry in [*result.labels.items(), ("overall", result.overall)]:
        for name, grid in (entry.margins or {}).items():
            out[f"{key}/margins/{label}/{name}"] = np.asarray(grid)


def capture(path: Path) -> None:
    sys.path.insert(0, str(TESTS))
    from probe_corpora import CORPORA, probe_run_arguments, selection_split
    from tiny_models import FAMILIES, build_tiny_model

    import probes
    from probes.base.defaults import default_model

    minilm = probes.load_encoder(default_model())
    shared = lambda: SHARED  # noqa: E731
    out: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bundled = [n for n in probes.available() if n not in CORPORA]
        for names in [bundled, *([n] for n in probes.available() if n in CORPORA)]:
            folder = root / names[0]
            folder.mkdir()
            arguments = probe_run_arguments(names[0], folder, shared)
            for mode in ("plain", "selected"):
                select = {"select_on": selection_split(names[0], folder, shared)} if mode == "selected" else {}
                results = probes.run(names, encoder=minilm, progress=False, views=2, replicates=REPLICATES,
                                     **arguments, **select)
                for name, result in results.items():
                    keep(result, f"{mode}/{name}", out)
                print(f"{mode}: {', '.join(names)}", file=sys.stderr, flush=True)
        dep = {"limit": probe_run_arguments("dep", root, shared)["limit"]}
        for name, result in probes.run(["dep"], encoder=minilm, progress=False, replicates=REPLICATES,
                                       weights="norm", **dep).items():
            keep(result, f"norm/{name}", out)
        for family in FAMILIES:
            checkpoint = build_tiny_model(family, root / "tiny" / family, seed=0)
            try:
                results = probes.run(["dep"], str(checkpoint), progress=False, replicates=REPLICATES, **dep)
            except probes.InputError as e:  # a family without attention maps: its message is the value kept
                out[f"family-{family}/error"] = np.asarray(str(e))
                continue
            for name, result in results.items():
                keep(result, f"family-{family}/{name}", out)
            print(f"family {family}", file=sys.stderr, flush=True)
        ablation = probes.ablate("dep", settings=probes.RunSettings(**dep), masks=["0:*", "1:0,2:3"], mode="zero",
                                 progress=False)
        flatten({k: v for k, v in ablation.to_json().items() if k not in LEFT_OUT}, "ablation/dep", out)
    for key, value in out.items():  # the temporary folder's name differs between runs
        if value.dtype.kind == "U":
            out[key] = np.char.replace(value, tmp, "TMP")
    np.savez(path, **out)
    print(f"{len(out)} arrays, {sum(a.size for a in out.values())} values written to {path}")


def compare(a: Path, b: Path) -> int:
    """The number of values that differ between two captures (a key present in one only counts its size)."""
    x, y = np.load(a), np.load(b)
    differing = 0
    for key in sorted(set(x.files) | set(y.files)):
        if key not in x.files or key not in y.files:
            size = (x if key in x.files else y)[key].size
            print(f"{key}: only in {a if key in x.files else b} ({size} values)")
            differing += size
            continue
        u, v = x[key], y[key]
        if u.shape != v.shape or u.dtype.kind != v.dtype.kind:
            print(f"{key}: shape {u.shape} {u.dtype} vs {v.shape} {v.dtype}")
            differing += max(u.size, v.size)
            continue
        if u.dtype.kind == "f":
            same = (u == v) | (np.isnan(u) & np.isnan(v))
        else:
            same = u == v
        n = int(np.size(same) - np.count_nonzero(same))
        if n:
            print(f"{key}: {n} of {u.size} values differ")
            differing += n
    print(f"{differing} differences in {len(x.files)} vs {len(y.files)} arrays")
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="the .npz file to write")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="count the values that differ")
    args = parser.parse_args()
    if args.compare:
        sys.exit(1 if compare(*map(Path, args.compare)) else 0)
    if not args.out:
        parser.error("give OUT.npz or --compare A B")
    capture(Path(args.out))


if __name__ == "__main__":
    main()
