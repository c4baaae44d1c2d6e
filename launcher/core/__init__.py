"""The pure core: spec -> plan -> commands, and the views of results. Values in, values out.

Nothing here reads the environment or files, prints, looks at the clock or starts a process
(tests/test_boundaries.py checks it, through everything it imports); it imports only itself
and `launcher.errors`.
"""
