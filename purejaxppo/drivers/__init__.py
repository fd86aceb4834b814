"""The drivers that run the core: one run (`single`), seeds (`seeds`), sweeps (`sweeps`)
and population-based training (`population`).

They stand side by side over `segments` (THE loop of jitted segments), `report`
(final return, IQM, summaries, atomic writes), `plots` (every figure) and `settings`
(sweep / search settings), and never import each other.
"""
