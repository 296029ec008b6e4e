"""The ground floor: errors, choices and defaults, options, provenance, checkpoints' files, small shared helpers.
Nothing here imports another floor of the package."""
