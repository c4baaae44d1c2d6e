"""Entry point for `python -m testbed`."""

from __future__ import annotations

from testbed.cli import main

raise SystemExit(main())
