"""Named protocols: a published paper's reading of a probe, every choice set at once (``--protocol``).

A protocol fixes the run-level choices (the subword pooling rule) and the options of the probes it
covers. The run records its name in the results' ``settings["protocol"]``, and the choices it set
appear in each result's ``options`` (and ``settings["pool"]``) like any other option. An explicit
option or ``--pool`` that contradicts the protocol is refused, as is a probe the protocol does not cover.

    hechoi2021   dep as He & Choi's code scores it: the project's defaults (their code matches them
                 cell for cell on the same attention maps).
    clark2019    dep as Clark et al.'s code (attention-analysis) scores it: each word's own column zeroed
                 and the [CLS]/[SEP] rows and columns dropped before the argmax (so a word only ever
                 points at another word, and root arcs are counted but never right); pooling
                 ``first-sum`` (their code's default ``mode="first"``: the first subword's row, the sum
                 of the subwords' columns; the paper describes mean rows); "head → dependent" read as
                 a column argmax (the word attending most to the dependent is its head); offset
                 baselines −3..+2 (their ``range(-3, 3)``, offset 0 included) clamped to the sentence
                 (position 0, the root, at the left edge; the last word at the right edge).
    kovaleva2019 frames as Kovaleva et al. 2019 (§4.2) select and score instances: sentences of at
                 most 12 words, core frame elements only, of at most 3 words, none adjacent to the
                 target; pooling ``mean-sum``. These are the frames probe's defaults.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probes.base.errors import InputError

DEFAULT_POOL = "mean-sum"


@dataclass(frozen=True)
class Protocol:
    """A paper's choices: the pooling rule and, per probe it covers, the probe options it sets."""

    name: str
    source: str
    pool: str
    options: dict[str, dict[str, Any]]  # probe name -> {option name: value}


PROTOCOLS = {p.name: p for p in (
    Protocol("hechoi2021", "He & Choi 2021, The Stem Cell Hypothesis (their code)", "mean-sum",
             {"dep": {"zero_self": False, "words_only": False, "head_to_dep": "row", "offsets": "free"}}),
    Protocol("clark2019", "Clark et al. 2019, What Does BERT Look At? (their code)", "first-sum",
             {"dep": {"zero_self": True, "words_only": True, "head_to_dep": "column", "offsets": "clamped"}}),
    Protocol("kovaleva2019", "Kovaleva et al. 2019, Revealing the Dark Secrets of BERT, §4.2", "mean-sum",
             {"frames": {"max_sentence_words": 12, "max_fe_words": 3, "adjacent_fes": False, "all_fes": False}}),
)}


def apply_protocol(name: str | None, classes: list[type], pool: str | None,
                   options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The pooling rule and probe options of a run under protocol `name` (None: the given ones, pool
    defaulting to mean-sum). InputError for an unknown protocol, a probe it does not cover, or an
    explicit `pool` or option that contradicts it."""
    if name is None:
        return pool or DEFAULT_POOL, options
    protocol = PROTOCOLS.get(name)
    if protocol is None:
        raise InputError(f"unknown protocol {name!r}; choose one of {', '.join(PROTOCOLS)}")
    uncovered = [cls.name for cls in classes if cls.name not in protocol.options]
    if uncovered:
        raise InputError(f"protocol {name} sets the choices of {', '.join(protocol.options)} only, not of "
                         f"{', '.join(uncovered)}; run those without --protocol")
    if pool is not None and pool != protocol.pool:
        raise InputError(f"--pool {pool} contradicts protocol {name}, which pools {protocol.pool}")
    chosen = dict(options)
    for cls in classes:
        declared = {o.name: o for o in cls.options}
        for option, value in protocol.options[cls.name].items():
            if option in options and declared[option].convert(options[option], cls.name) != value:
                raise InputError(f"--{option.replace('_', '-')} {options[option]} contradicts protocol {name}, "
                                 f"which sets {option} = {value}")
            chosen[option] = value
    return protocol.pool, chosen
