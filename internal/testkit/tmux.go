package testkit

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Tmux is a terminal of a given size running one command, as a user's:
// tests read its screen (capture-pane) and resize it.
type Tmux struct {
	t    testing.TB
	sock string
}

// NewTmux starts argv in a detached tmux session of cols x rows, with env
// (KEY=VALUE) set. It skips without tmux, except in CI (the Makefile's
// DEBS has it); the server is killed at cleanup.
func NewTmux(t testing.TB, cols, rows int, env []string, argv ...string) *Tmux {
	t.Helper()
	NeedTool(t, "tmux", "make deps installs it")
	m := &Tmux{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	args := []string{"-f", "/dev/null", "new-session", "-d", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows)}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	m.Run(append(args, argv...)...)
	// The pane stays when the command ends, so its last screen can be read.
	m.Run("set-option", "-g", "remain-on-exit", "on")
	t.Cleanup(func() { exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	return m
}

// Run runs a tmux command against the session's server.
func (m *Tmux) Run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", m.sock}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %q: %v: %s", args, err, out)
	}
	return string(out)
}

// Screen is what the pane shows, one string a screen line (a line the
// terminal wrapped is two).
func (m *Tmux) Screen() []string {
	return strings.Split(strings.TrimRight(m.Run("capture-pane", "-p"), "\n"), "\n")
}

// Joined is the screen with wrapped lines joined, as written.
func (m *Tmux) Joined() string { return m.Run("capture-pane", "-p", "-J") }

// Resize makes the terminal cols x rows; the program gets SIGWINCH.
func (m *Tmux) Resize(cols, rows int) {
	m.Run("resize-window", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows))
}
