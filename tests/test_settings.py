"""One definition of the run settings (probes.settings.run_settings.RunSettings): the flags of `probes run` and `probes ablate`,
the keys a study file may set and the settings a results file records are all RunSettings fields, and nothing
names a run setting that RunSettings does not define."""
from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

import probes
from probes.cli import build_parser
from probes.settings.registry import declared
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo
from probes.settings.run_settings import (ABLATE_SETTINGS, COMMAND_FLAGS, RUN_ARGUMENTS, RunSettings, command_flags, flag_of,
                             option_flag, setting_names, study_types)
from probes.tools.studies.spec import GROUP_KEYS, SETTINGS


def _flags(command: str) -> set[str]:
    """Every long flag of the real `probes <command>` parser but the probes' own options."""
    options = {option_flag(o.name) for cls in declared().values() for o in cls.options}
    parser = build_parser().commands[command]
    return {f for action in parser._actions for f in action.option_strings if f.startswith("--")} - options


@pytest.mark.parametrize("command", list(COMMAND_FLAGS))
def test_the_command_flags_the_registry_reserves_are_the_parsers(command):
    """The registry refuses a probe option named like a flag from this data, not from the parsers: they agree."""
    assert _flags(command) == command_flags(command)


def test_every_run_flag_but_the_commands_own_is_a_setting():
    own = {option_flag(name) for name in COMMAND_FLAGS["run"]}
    settings = {flag_of(name) for name in setting_names()} - {None}
    assert _flags("run") - own == settings
    assert {flag_of(name) for name in ABLATE_SETTINGS} <= _flags("ablate")


def test_the_study_file_sets_settings_only():
    assert set(SETTINGS) == set(study_types()) and set(SETTINGS) <= set(setting_names())
    assert {"fit", "fit_on", "format", "annotate"} <= set(GROUP_KEYS) & set(setting_names())
    for name, types in SETTINGS.items():
        default = RunSettings.__dataclass_fields__[name].default
        assert default is None or isinstance(default, types) or name == "view_heads", name


def test_the_results_json_records_settings_only(tiny_model):
    result = probes.run(["dep"], str(tiny_model("bert")), limit=4, replicates=3, progress=False,
                        shard="0/2", protocol="hechoi2021", capture="hooks")["dep"]
    recorded = set(result.info.settings)
    assert recorded <= set(setting_names())
    assert recorded == {f.name for f in fields(RunSettings) if f.metadata.get("recorded")} - {"fit", "select_on",
                                                                                              "allow_unknown"}
    assert result.info.settings["shard"] == "0/2" and result.info.settings["replicates"] == 3


def test_run_takes_settings_and_overrides():
    """probes.run: at most 6 parameters besides **overrides, none of them a setting."""
    parameters = inspect.signature(probes.run).parameters
    named = [p for p in parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert len(named) <= 6 and tuple(p.name for p in named) == RUN_ARGUMENTS
    assert not set(RUN_ARGUMENTS) & set(setting_names())


def test_ablate_takes_settings_and_its_own_options_only():
    """probes.ablate (issue 43 item 5): a RunSettings as probes.run takes it, and only the ablation's own options
    besides; no parameter repeats a setting (format, batch_size, max_length, limit, device were loose keywords)."""
    parameters = inspect.signature(probes.ablate).parameters
    named = [p.name for p in parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert named[:4] == ["target", "model", "corpus", "settings"] and not set(named) & set(setting_names())
    assert parameters["settings"].default is None and "overrides" in parameters
    assert not set(named) & {o.name for cls in probes.available().values() for o in cls.options}  # no clash: seed


def test_ablate_refuses_a_probe_targets_setting_for_classify(tmp_path):
    data = tmp_path / "data.tsv"
    data.write_text("a text\tyes\n", encoding="utf-8")
    with pytest.raises(probes.InputError, match="^setting 'pool' is for probe targets, not for classify$"):
        probes.ablate("classify", "some/classifier", data, RunSettings(pool="first-sum"))
    with pytest.raises(probes.InputError, match="^option 'subtypes' is for probe targets, not for classify$"):
        probes.ablate("classify", "some/classifier", data, subtypes=True)


def test_settings_check_their_ranges_and_keep_paths_as_text():
    with pytest.raises(probes.InputError, match="batch size must be at least 1, not 0"):
        RunSettings(batch_size=0)
    with pytest.raises(probes.InputError, match="unknown pooling rule 'odd'"):
        RunSettings().replace(pool="odd")
    with pytest.raises(probes.InputError, match="--select-on cannot be combined with --shard"):
        RunSettings(select_on="dev.conllu", shard=(0, 2))
    settings = RunSettings(fit="dev.conllu", view_heads=[[2, 3]], shard="1/4")
    assert settings.fit == ("dev.conllu",) and settings.view_heads == ((2, 3),) and str(settings.shard) == "1/4"
    assert settings.recorded()["shard"] == "1/4" and "shard" not in RunSettings().recorded()


def test_an_override_beats_the_settings_and_a_probe_option_passes_through(tmp_path):
    info = RunInfo("m", ["c"], 1, 1, 1, {}, RunSettings(min_count=3).recorded(), {})
    assert ProbeResult("dep", info, {}, {}, LabelScores(1, [[0.5]])).min_count == 3
    with pytest.raises(probes.InputError, match="limit must be at least 1, not 0"):
        probes.run(["dep"], settings=RunSettings(limit=5), limit=0)
    with pytest.raises(probes.InputError, match="no selected probe has an option 'no_such_option'"):
        probes.run(["dep"], settings=RunSettings(limit=5), no_such_option=1, model=str(tmp_path / "never-loaded"))
