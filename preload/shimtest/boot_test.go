package shimtest

import "testing"

// A thread that allocates while the shim boots waits for boot (boot.c,
// the order of publication): its blocks are counted, and its slot is
// folded when it ends. bootrace.c starts it from inside boot, at the
// shim's pthread_key_create, before the exit key exists.
func TestAllocateWhileBooting(t *testing.T) {
	const blocks, size = 1000, 40 // bootrace.c's
	prog := compile(t, "bootrace.c", "-rdynamic", "-ldl")
	glibc := inMode(t, "glibc")
	known(t, nil, prog, nil, func(s step, now summary) {
		glibc(s, now)
		switch s.name {
		case "held":
			if now.LiveBlocks < blocks || now.LiveBytes < blocks*size {
				t.Errorf("with the thread's %d blocks of %d bytes held: %d live blocks, %d live bytes", blocks, size, now.LiveBlocks, now.LiveBytes)
			}
		case "joined":
			if live := headerWord(t, s.pid, "hl_header.threads_live"); live != 1 {
				t.Errorf("threads_live = %d after the thread ended, want 1 (main): its slot was not folded", live)
			}
		}
	})
}

// A free before anything has booted the shim, from a program's
// preinit_array, of a block of glibc's own malloc: the shim passes it to
// glibc's free (on aarch64 it once added through an unset thread-pointer
// offset, count_hotpair_arm64.c). freeearly.c fails if the shim had booted.
func TestFreeBeforeBoot(t *testing.T) {
	prog := compile(t, "freeearly.c")
	known(t, nil, prog, nil, inMode(t, "glibc"))
}
