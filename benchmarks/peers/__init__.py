"""Peers' own programs, run in the peer's own environment (`python -m benchmarks.peers.NAME`
from the repository root, the peer's packages on PYTHONPATH)."""
