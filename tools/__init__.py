"""The project's own checks and generators. Not part of the installed library.

`python tools/structure.py` and `python tools/capabilities.py` run as scripts; the probes
of the command line are a package, run as modules from the repository root:
`python -m tools.probes.NAME`.
"""
