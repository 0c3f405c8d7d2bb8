"""pytest on the Triton example (flashcheck_pytest), on a GPU machine with Triton: the report's cases and the property
tier on triton_attention.attention, one item each. Run from subjects/python with the build tree named:

    python3 -m pytest -p flashcheck_pytest --flashcheck-build build/gpu subjects/python/tests/test_triton_attention.py
"""
import pytest

import flashcheck_pytest

pytestmark = pytest.mark.flashcheck(subject="python:triton_attention:attention", random=4, cases=20)


def test_case(flashcheck_case):
    flashcheck_pytest.check(flashcheck_case)


def test_property(flashcheck_property):
    flashcheck_pytest.check(flashcheck_property)
