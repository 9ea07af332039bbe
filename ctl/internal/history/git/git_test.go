package git

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/heapline/heapline/internal/testkit"
)

func isFull(s string) bool { return len(s) == 40 }

func TestGit(t *testing.T) {
	testkit.NeedTool(t, "git", "the clone needed it")
	ctx := context.Background()
	repo := t.TempDir()
	testkit.Git(t, repo, "init", "-q", "-b", "main")
	testkit.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "one")
	head := testkit.Git(t, repo, "rev-parse", "HEAD")
	if d := Describe(ctx, repo); !strings.HasPrefix(head, d) {
		t.Errorf("Describe = %q, want a prefix of %s", d, head)
	}
	t.Chdir(repo)
	if h, r := Head(ctx), Ref(ctx); h != head || r != "refs/heads/main" {
		t.Errorf("Head, Ref = %q, %q; want %s, refs/heads/main", h, r, head)
	}
	if full, err := FullCommit(ctx, head[:7]+"-dirty", isFull); err != nil || full != head+"-dirty" {
		t.Errorf("FullCommit(short-dirty) = %q, %v", full, err)
	}
	other := strings.Repeat("ab", 20)
	if full, err := FullCommit(ctx, other, isFull); err != nil || full != other {
		t.Errorf("FullCommit(unknown full hash) = %q, %v; want it kept", full, err)
	}
	if _, err := FullCommit(ctx, "v9.9.9", isFull); !errors.Is(err, ErrUnresolved) || err.Error() != `commit "v9.9.9": git cannot resolve it to a full hash here` {
		t.Errorf("FullCommit(v9.9.9): %v", err)
	}
	t.Chdir(t.TempDir())
	if h, r := Head(ctx), Ref(ctx); h != "" || r != "" {
		t.Errorf("outside a checkout: Head, Ref = %q, %q", h, r)
	}
}
