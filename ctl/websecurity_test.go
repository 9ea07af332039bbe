package main

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/heapline/heapline/internal/testkit"
)

// wsUser is testkit.NewUser's user, as the ids syscall.Credential takes:
// an attack by another local user is made by one.
func wsUser(t *testing.T) (name string, uid, gid uint32) {
	t.Helper()
	u := testkit.NewUser(t)
	return u.Name, uint32(u.UID), uint32(u.GID)
}

// wsAs runs cmd as uid and gid.
func wsAs(cmd *exec.Cmd, uid, gid uint32) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	return cmd
}

// wsStatus is the status of a GET of u with Host host ("": u's).
func wsStatus(t *testing.T, u, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return testkit.Do(t, c, req)
}

// view serves under the token of the URL it prints: without it, with
// another, or with a Host that names another site (DNS rebinding), it
// answers 403; pprof's configuration is never saved.
func TestViewToken(t *testing.T) {
	file, _ := vwSites(t)
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	served := vwServeEnv(t, env, "--no-browser", file)
	u, err := url.Parse(served)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^/[0-9a-f]{32}$`).MatchString(u.Path) {
		t.Fatalf("view serves on %s: no token in its path", served)
	}
	root := "http://" + u.Host
	for _, c := range []struct {
		url, host string
		want      int
	}{
		{served + "/", "", http.StatusMovedPermanently}, // pprof: to ./flamegraph
		{served + "/flamegraph", "", 200},
		{served + "/source?f=.", "", 200},
		{served + "/heapline", "", 404}, // a file without a timeline has no page
		{served, "", http.StatusFound},
		{root + "/", "", 403},
		{root + "/flamegraph", "", 403},
		{root + "/source?f=.", "", 403},
		{root + "/download", "", 403},
		{root + strings.Replace(u.Path, u.Path[1:2], "x", 1) + "/top", "", 403},
		{root + u.Path + "x/top", "", 403},
		{served + "/top", "evil.example:" + u.Port(), 403},
		{served + "/top", "localhost:" + u.Port(), 200},
		{served + "/saveconfig?config=x", "", 403},
		{served + "/deleteconfig?config=x", "", 403},
	} {
		if got, body := wsStatus(t, c.url, c.host); got != c.want {
			t.Errorf("GET %s (Host %q): %d, want %d\n%.300s", c.url, c.host, got, c.want, body)
		}
	}
	if loc, _ := wsLocation(t, served); loc != u.Path+"/" {
		t.Errorf("%s redirects to %q, want %q", served, loc, u.Path+"/")
	}
	req, _ := http.NewRequest("POST", served+"/saveconfig?config=mine", strings.NewReader(`{"focus":"x"}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("POST saveconfig: %v %v, want 403", err, resp)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "pprof")); !os.IsNotExist(err) {
		t.Errorf("pprof's settings were written under %s: %v", home, err)
	}
}

func wsLocation(t *testing.T, u string) (string, int) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("Location"), resp.StatusCode
}

// wsScript runs code compiled under each file name given, so that the
// process's Python frames name those files, and holds what it made.
const wsScript = `import sys
hold = []
src = "def grow():\n    for _ in range(64):\n        hold.append(bytearray(64 << 10))\ngrow()\n"
for name in sys.argv[1:]:
    exec(compile(src, name, "exec"), {"hold": hold})
print("ready", flush=True)
sys.stdin.read()
`

// Root views another user's Python process, whose code names a file only
// root reads, a FIFO, a symbolic link and the user's own file: the source
// view shows the user's own file, and of the others only why not.
func TestViewSourceOtherUser(t *testing.T) {
	_, uid, gid := wsUser(t)
	d := testkit.SharedDir(t)
	secret := filepath.Join(d, "secret.txt")
	os.WriteFile(secret, []byte(strings.Repeat("hunter2 is root's\n", 8)), 0o600)
	mine := filepath.Join(d, "mine.py")
	os.WriteFile(mine, []byte(strings.Repeat("the user's own line\n", 8)), 0o644)
	os.Chown(mine, int(uid), int(gid))
	fifo := filepath.Join(d, "fifo.py")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(fifo, int(uid), int(gid))
	link := filepath.Join(d, "link.py")
	os.Symlink(mine, link)
	os.Lchown(link, int(uid), int(gid))
	script := filepath.Join(d, "app.py")
	os.WriteFile(script, []byte(wsScript), 0o644)

	t.Setenv("HEAPLINE_SAMPLE", "4k")
	t.Setenv("HEAPLINE_PYMALLOC", "1")
	cmd := wsAs(exec.Command(testkit.Interpreter(t, "/usr/bin/python3.11"), script, secret, fifo, link, mine), uid, gid)
	_, in, out := rgPiped(t, cmd, testkit.Shim(t))
	t.Cleanup(func() { in.Close() })
	if l, err := out.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("script said %q, %v", l, err)
	}
	check := func(what, served, owner string) {
		t.Helper()
		// Bounded: pprof opening the FIFO itself would wait for a writer.
		c := &http.Client{Timeout: time.Minute}
		resp, err := c.Get(served + "/source?f=grow")
		if err != nil {
			t.Fatalf("%s: the source view: %v", what, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := html.UnescapeString(string(b))
		for _, want := range []string{
			"the user's own line",
			"does not show " + secret + ": uid " + strconv.Itoa(int(uid)) + " (the " + owner + "'s owner) may not read it",
			"does not show " + fifo + ": it is not a regular file",
			"does not show " + link + ": it is a symbolic link",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the source view has no %q\n%.3000s", what, want, page[max(0, strings.Index(page, "<div id=\"content\"")):])
			}
		}
		if strings.Contains(page, "hunter2") {
			t.Errorf("%s: the source view shows a file only root reads, for uid %d", what, uid)
		}
	}
	check("the live process", vwServe(t, strconv.Itoa(cmd.Process.Pid)), "process")
	// Its profile, a file of the user's: the file owner's rights.
	file := filepath.Join(d, "user.pb.gz")
	if r := heapctl(t, "profile", "-o", file, strconv.Itoa(cmd.Process.Pid)); r.err != nil {
		t.Fatal(r.err)
	}
	os.Chown(file, int(uid), int(gid))
	check("the user's profile file", vwServe(t, file), "profile")
}

// wsHold holds 8 MiB until its stdin closes.
const wsHold = "import sys\nx = [bytearray(1 << 20) for _ in range(8)]\nprint('ready', flush=True)\nsys.stdin.read()\n"

// wsStartHold starts wsHold under the shim, as uid and gid when cred,
// with args after the script, and returns its pid once it holds.
func wsStartHold(t *testing.T, script string, cred bool, uid, gid uint32, args ...string) int {
	t.Helper()
	cmd := exec.Command(testkit.Interpreter(t, "/usr/bin/python3.11"), append([]string{script}, args...)...)
	if cred {
		wsAs(cmd, uid, gid)
	}
	pid, in, out := rgPiped(t, cmd, testkit.Shim(t))
	t.Cleanup(func() { in.Close() })
	if l, err := out.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("script said %q, %v", l, err)
	}
	return pid
}

// wsCurl GETs u as uid and gid, with curl's args before it, and returns
// the status and body.
func wsCurl(t *testing.T, u string, uid, gid uint32, args ...string) (int, string) {
	t.Helper()
	out, err := wsAs(exec.Command("curl", append(append([]string{"-sS", "-w", "\n%{http_code}"}, args...), u)...), uid, gid).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", u, err)
	}
	body, code, _ := strings.Cut(string(out), "\n")
	for strings.Contains(code, "\n") { // a body of several lines
		var more string
		more, code, _ = strings.Cut(code, "\n")
		body += "\n" + more
	}
	n, _ := strconv.Atoi(code)
	return n, body
}

// export's profiles: another local user, unauthenticated, reads its own
// processes' profiles, never root's; a profile names the program, never
// its command line; a Host naming another site gets 403; `go tool pprof
// URL` reads a stripped program's profile (Debian's python3).
func TestExportProfileAccess(t *testing.T) {
	_, uid, gid := wsUser(t)
	testkit.NeedTool(t, "curl", "make deps installs it")
	goBin := testkit.NeedTool(t, "go", "the Go toolchain")
	d := testkit.SharedDir(t)
	script := filepath.Join(d, "hold.py")
	os.WriteFile(script, []byte(wsHold), 0o644)
	t.Setenv("HEAPLINE_SAMPLE", "64k")
	rootPID := wsStartHold(t, script, false, 0, 0, "--db-password=hunter2")
	userPID := wsStartHold(t, script, true, uid, gid)
	metricsURL := hsExport(t)
	base := strings.TrimSuffix(metricsURL, "/metrics") + pprofHeapPath + "?pid="

	if code, body := wsCurl(t, base+strconv.Itoa(rootPID), uid, gid); code != 403 || !strings.Contains(body, "a client reads its own user's processes' profiles only") {
		t.Errorf("uid %d reading root's pid %d: %d, want 403\n%s", uid, rootPID, code, body)
	}
	if code, body := wsCurl(t, base+strconv.Itoa(userPID), uid, gid); code != 200 {
		t.Errorf("uid %d reading its own pid %d: %d, want 200\n%s", uid, userPID, code, body)
	}
	resp, err := http.Get(base + strconv.Itoa(rootPID))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("root reading root's pid: %v %v", err, resp)
	}
	p, err := pprof.Parse(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	comments := strings.Join(p.Comments, "\n")
	if strings.Contains(comments, "hunter2") || !strings.Contains(comments, "(python3.11)") {
		t.Errorf("the profile's comments name %q, want the program (python3.11) and no argument", comments)
	}

	port := strings.Split(strings.TrimPrefix(metricsURL, "http://"), "/")[0]
	_, port, _ = strings.Cut(port, ":")
	for host, want := range map[string]int{"evil.example:" + port: 403, "localhost:" + port: 200, "127.0.0.1:" + port: 200} {
		if code, body := wsStatus(t, metricsURL, host); code != want {
			t.Errorf("Host %s: %d, want %d\n%.300s", host, code, want, body)
		}
	}

	// With a password (--web.config.file's users), any client reads any
	// profile; without one, that export answers 401.
	f := flWebConfig(t)
	authed := strings.TrimSuffix(hsExport(t, "--web.config.file", f.webConfig), "/metrics") + pprofHeapPath + "?pid=" + strconv.Itoa(rootPID)
	if code, body := wsCurl(t, authed, uid, gid, "-k", "-u", flUser+":"+flPassword); code != 200 {
		t.Errorf("uid %d with the password: %d, want 200\n%.300s", uid, code, body)
	}
	if code, body := wsCurl(t, authed, uid, gid, "-k"); code != 401 {
		t.Errorf("uid %d without the password: %d, want 401\n%.300s", uid, code, body)
	}

	cmd := exec.Command(goBin, "tool", "pprof", "-top", base+strconv.Itoa(rootPID))
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Type: inuse_space") {
		t.Errorf("go tool pprof -top: %v\n%s", err, out)
	}
}
