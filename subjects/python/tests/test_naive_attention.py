"""pytest on a kernel written in Python (flashcheck_pytest): the report's cases and the property tier on
naive_attention.attention, one item each. Run from subjects/python with the build tree named:

    python3 -m pytest -p flashcheck_pytest --flashcheck-build build/ci subjects/python/tests
"""
import pytest

import flashcheck_pytest

pytestmark = pytest.mark.flashcheck(subject="python:naive_attention:attention", random=2, cases=5)


def test_case(flashcheck_case):
    flashcheck_pytest.check(flashcheck_case)


def test_property(flashcheck_property):
    flashcheck_pytest.check(flashcheck_property)
