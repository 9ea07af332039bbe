import os

import pytest

from blocks import hold

hold(1)


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_0():
    hold(0)


# test_exact.py's test_30, limited to the bytes in LIMIT
@pytest.mark.limit_memory(int(os.environ["LIMIT"]))
def test_30():
    hold(30, 5)
