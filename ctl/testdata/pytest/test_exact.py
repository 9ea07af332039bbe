import pytest

from blocks import hold

hold(1)  # the first calls' own allocations are not the tests'


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_0():
    hold(0)


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_10():
    hold(10, 0)


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_30():
    hold(30, 5)
