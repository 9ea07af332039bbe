package gate

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// units are the suffixes ParseSize takes, lowercased: kB, MB, GB, TB are
// powers of 1000, as SI and the disk makers say; KiB..TiB and the bare
// letters K, M, G, T powers of 1024, as HEAPLINE_SAMPLE's k and m are.
var units = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseSize reads a size in bytes: a number, whole or decimal (1.5G),
// and a unit, any case: none or B for bytes, K/M/G/T or KiB..TiB for
// powers of 1024, kB..TB for powers of 1000. A fraction of a byte is
// dropped.
func ParseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("%q is not a size: unknown unit %q (B, K, M, G, T: powers of 1024, also as KiB..TiB; kB, MB, GB, TB: powers of 1000)", v, s[i:])
	}
	n, ok := new(big.Rat).SetString(num)
	if num == "" || strings.HasPrefix(num, ".") || strings.HasSuffix(num, ".") || !ok {
		return 0, fmt.Errorf("%q is not a size: want a number and a unit, such as 24MiB, 1.5G or 500000", v)
	}
	n.Mul(n, new(big.Rat).SetInt64(mult))
	b := new(big.Int).Quo(n.Num(), n.Denom())
	if !b.IsInt64() {
		return 0, fmt.Errorf("%q is too large a size (at most %d bytes)", v, int64(math.MaxInt64))
	}
	return b.Int64(), nil
}

// ParseCount reads a count: a whole number, with no unit.
func ParseCount(v string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a count: want a whole number, such as 100000", v)
	}
	return n, nil
}
