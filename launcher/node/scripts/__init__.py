"""The code that runs on the nodes: one module per job, and the libraries they share.

Standard library only, Python 3.8 or newer, run without `site` (`python3 -S`): nothing is
installed on the nodes for it. The launcher ships this package as one unit (`node/unit.py`:
a zip of it, named by its sha256, kept on each node and hashed before each use) and runs a
script as `python3 -S -c STUB UNIT SCRIPT DIR ARGS...` (`core.remote`): the script's module
runs as __main__ and imports its libraries relatively (`from .common import emit`). The
probe, the catalog generator and the preflight run under the node's own vLLM install instead
(`probe.py`, `learn_catalog.py` and `traits.py` import vLLM, `preflight.py` torch).

A script's start imports only what every call of it needs: every node pays it on every call.
Names used in annotations only come under `if TYPE_CHECKING:` (`typing` alone costs a node
2 ms), and what one rare path needs is imported in that path's function. This file imports
nothing: every script's start loads it.
"""
