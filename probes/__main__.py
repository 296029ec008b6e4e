from probes.cli import entry

entry()
