import pytest

kept = []

def keep(n):
    kept.append(bytearray(n))

@pytest.mark.limit_leaks("1 MB")
def test_leaks():
    for _ in range(4):
        keep(500_000)
