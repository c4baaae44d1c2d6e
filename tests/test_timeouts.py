"""pytest's timeout (a hang fails its test with every thread's stack) must outlast every wait
that a fixture bounds itself: a fixture cut short by pytest says nothing of what it waited for."""

from __future__ import annotations

import tomllib

from tests.conformance.conftest import PROBE_SECONDS
from tests.conftest import ROOT
from tests.e2e.conftest import BED_UP_SECONDS, ENGINES_SECONDS, VENV_WAIT_SECONDS

PYTEST_TIMEOUT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"][
    "timeout"
]


def test_the_beds_first_up_and_the_engines_image_fit_in_one_tests_timeout() -> None:
    assert VENV_WAIT_SECONDS < BED_UP_SECONDS  # the wait for another venv build is inside `up`'s own
    assert BED_UP_SECONDS + ENGINES_SECONDS < PYTEST_TIMEOUT


def test_a_releases_probe_batch_fits_in_one_tests_timeout() -> None:
    assert PROBE_SECONDS < PYTEST_TIMEOUT
