// Package git asks the checkout which commit and branch a measurement was
// made on, for history add and for the environment overhead records. It
// lives beside history, not in it, because history reads overhead's
// results and overhead's environment needs these too.
package git

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrUnresolved is FullCommit's error for a name git does not resolve.
var ErrUnresolved = errors.New("git cannot resolve it to a full hash here")

// Output runs git in dir ("" for the working directory) and returns what
// it printed, trimmed; "" when git fails or is missing.
func Output(ctx context.Context, dir string, args ...string) string {
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	out, err := exec.CommandContext(ctx, "git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Head is the commit checked out in the working directory, or "".
func Head(ctx context.Context) string {
	return Output(ctx, "", "rev-parse", "--verify", "-q", "HEAD")
}

// Ref is the branch checked out (refs/heads/main), else a tag pointing at
// HEAD (refs/tags/v0.2.0: a detached tag checkout, as CI makes), else
// "HEAD"; "" outside a git checkout.
func Ref(ctx context.Context) string {
	if r := Output(ctx, "", "symbolic-ref", "-q", "HEAD"); r != "" {
		return r
	}
	if t := Output(ctx, "", "describe", "--tags", "--exact-match", "HEAD"); t != "" {
		return "refs/tags/" + t
	}
	if Head(ctx) != "" {
		return "HEAD"
	}
	return ""
}

// Describe names the commit checked out in dir as `git describe` does
// (v0.1.0-3-g0123abc-dirty, or a short hash); "" outside a checkout.
func Describe(ctx context.Context, dir string) string {
	return Output(ctx, dir, "describe", "--always", "--dirty", "--tags")
}

// FullCommit names a commit by its full hash, so that one commit is one
// key of the store: git resolves a short hash, a tag or a description
// (v0.1.0-3-g0123abc) in the checkout of the working directory; a "-dirty"
// suffix is kept. A full hash git does not know (a store fed from another
// machine's results) is kept as it is (isFull says which names are); any
// other name is refused with ErrUnresolved.
func FullCommit(ctx context.Context, name string, isFull func(string) bool) (string, error) {
	name = strings.TrimSpace(name)
	base, dirty := strings.CutSuffix(name, "-dirty")
	suffix := ""
	if dirty {
		suffix = "-dirty"
	}
	if full := Output(ctx, "", "rev-parse", "--verify", "-q", base+"^{commit}"); full != "" {
		return full + suffix, nil
	}
	if isFull(base) {
		return name, nil
	}
	return "", fmt.Errorf("commit %q: %w", name, ErrUnresolved)
}
