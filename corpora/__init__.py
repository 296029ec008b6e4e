"""Small licensed corpus samples shipped with probes (installed as ``probes.corpora``).

MANIFEST.json lists each file, its source, licence and size; the licences sit beside them.
"""
