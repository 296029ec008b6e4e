"""The probe base class (Probe, LabelSums, replicate-aware state) and shared scoring helpers."""
