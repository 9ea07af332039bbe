package procs

// Alive reports whether the process that was pid, and started at
// startTicks (field 22 of /proc/pid/stat, 0: unknown) in time namespace
// timeNS, still runs. kill(pid, 0) failing with ESRCH means no such
// process (EPERM means it exists but is another user's). A pid can be
// reused, so a known start time must match the one of the process now
// holding the pid, where /proc can say so: it shows our pid namespace
// (showsOurs: ShowsOwnPidNS), and timeNS is ours (SameTimeNS), since /proc
// shows a start time shifted by the reader's namespace's boot-time offset.
func Alive(pid int, startTicks, timeNS uint64, showsOurs bool) bool {
	return Read(pid).Alive(startTicks, timeNS, showsOurs)
}
