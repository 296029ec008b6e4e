"""What a run is asked to do: RunSettings, the probes' declarations and the registry that loads a probe's code.

The names of probes.settings.run_settings are re-exported here (settings was one module before the floors became folders)."""
from probes.base.exports import lazy_exports

_PUBLIC = dict.fromkeys(('setting', 'GROUPS', 'RunSettings', 'setting_names', 'study_types', 'option_flag', 'flag_of', 'settings_from', 'RUN_ARGUMENTS', 'COMMAND_FLAGS', 'ABLATE_SETTINGS', 'command_flags'), "probes.settings.run_settings")
__all__ = list(_PUBLIC)
lazy_exports(__name__, _PUBLIC)
