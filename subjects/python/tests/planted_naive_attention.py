"""The same on the planted alignment bug (naive_attention.attention_aligned): the items that meet it fail with the
case line and the flashcheck-repro command that replays it. Not collected by default (the name does not start with
test_); subjects/tests/pytest_subject_test.sh runs it and expects those failures."""
import pytest

import flashcheck_pytest

pytestmark = pytest.mark.flashcheck(subject="python:naive_attention:attention_aligned", random=2, cases=20)


def test_case(flashcheck_case):
    flashcheck_pytest.check(flashcheck_case)


def test_property(flashcheck_property):
    flashcheck_pytest.check(flashcheck_property)
