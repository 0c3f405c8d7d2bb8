"""The same on the Triton example's planted bug (triton_attention.attention_tail: the last key tile's padding joins
the softmax): the items that meet it fail with the case line and the flashcheck-repro command that replays it. Not
collected by default; subjects/python/tests/triton_example_test.sh runs it and expects those failures."""
import pytest

import flashcheck_pytest

pytestmark = pytest.mark.flashcheck(subject="python:triton_attention:attention_tail", random=4, cases=20)


def test_case(flashcheck_case):
    flashcheck_pytest.check(flashcheck_case)


def test_property(flashcheck_property):
    flashcheck_pytest.check(flashcheck_property)
