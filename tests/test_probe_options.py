"""Probe options given from Python (or a study file, as text) are converted and checked like the CLI's."""
from __future__ import annotations

import pytest

import probes
from probes.builtin.dep import DependencyProbe
from probes.builtin.frames import FrameElementProbe
from probes.builtin.srl import SemanticRoleProbe
from probes.base.errors import InputError


def test_text_values_convert_to_the_option_type():
    assert FrameElementProbe(1, 1, max_fe_words="5").config["max_fe_words"] == 5
    assert DependencyProbe(1, 1, subtypes="true").config["subtypes"] is True
    assert DependencyProbe(1, 1, subtypes="no").config["subtypes"] is False
    assert FrameElementProbe(1, 1, max_fe_words=5.0).config["max_fe_words"] == 5


@pytest.mark.parametrize("cls, options, problem", [
    (FrameElementProbe, {"max_fe_words": "five"}, "option 'max_fe_words' takes a value of type int, not 'five'"),
    (FrameElementProbe, {"max_fe_words": 5.5}, "option 'max_fe_words' takes a whole number, not 5.5"),
    (FrameElementProbe, {"max_fe_words": True}, "option 'max_fe_words' takes a number (int), not True"),
    (DependencyProbe, {"subtypes": "maybe"}, "option 'subtypes' takes true or false, not 'maybe'"),
    (SemanticRoleProbe, {"arg_span": "phrase"}, "option 'arg_span' must be one of subtree, head, not 'phrase'"),
    (DependencyProbe, {"subtype": True}, "probe 'dep' has no option 'subtype'"),
])
def test_bad_values_are_input_errors(cls, options, problem):
    with pytest.raises(InputError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        cls(1, 1, **options)


def test_run_refuses_a_bad_option_before_loading_any_model(monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr("probes.running.runner.load_encoder", no_model)
    with pytest.raises(InputError, match="option 'max_fe_words' takes a value of type int, not 'five'"):
        probes.run(["frames"], max_fe_words="five")
    with pytest.raises(InputError, match="min count must be a whole number, 0 or more, not 'five'"):
        probes.run(["frames"], min_count="five")
