import pytest

@pytest.mark.limit_memory("24 MB")
def test_within():
    b = bytearray(20_000_000)
    del b

@pytest.mark.limit_leaks("1 MB")
def test_no_leak():
    b = [bytearray(100_000) for _ in range(50)]
    del b
