package clikit

import (
	"cmp"
	"fmt"
)

// The bound checks of every command's flags, in one wording: "-n must be
// at least 1 and at most 10000 (got 0)". flag is the flag as users type
// it ("-n", "--interval"); the caller prefixes its command where its other
// errors have it.

// AtLeast checks that flag's value v is min or more. A float's NaN is
// not.
func AtLeast[T cmp.Ordered](flag string, v, min T) error {
	if !(v >= min) {
		return fmt.Errorf("%s must be at least %v (got %v)", flag, min, v)
	}
	return nil
}

// Within checks that flag's value v is from min to max: -n 99999999999
// is a typo, not a plan.
func Within[T cmp.Ordered](flag string, v, min, max T) error {
	if !(v >= min && v <= max) {
		return fmt.Errorf("%s must be at least %v and at most %v (got %v)", flag, min, max, v)
	}
	return nil
}
