"""Checks /app/stats.py as a user imports it."""

import sys

import pytest

sys.path.insert(0, "/app")
import stats  # noqa: E402


def test_odd_count():
    assert stats.median([3, 1, 2]) == 2


def test_even_count():
    assert stats.median([4, 1, 3, 2]) == 2.5


def test_input_left_unchanged():
    values = [3, 1, 2]
    stats.median(values)
    assert values == [3, 1, 2]


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        stats.median([])


def test_mean_still_works():
    assert stats.mean([1, 2, 3, 4]) == 2.5
