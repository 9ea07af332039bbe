import pytest

def make_big():
    return bytearray(30_000_000)

@pytest.mark.limit_memory("24 MB")
def test_over():
    b = make_big()
    del b
