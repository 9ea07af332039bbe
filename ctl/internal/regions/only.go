package regions

// OnlyPIDs is list keeping the regions of the processes pids only (pids
// of ours): export --pid. A region of another pid namespace is matched by
// the pid we know its process by (Entry.Proc), never by the pid in its
// name, which is a pid of another namespace; a region whose process is
// gone, by its name when it is of ours.
func OnlyPIDs(list func() ([]Entry, error), pids []int) func() ([]Entry, error) {
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	return func() ([]Entry, error) {
		all, err := list()
		var out []Entry
		for _, e := range all {
			pid := e.Proc
			if pid == 0 && !e.OtherNS() {
				pid = e.PID
			}
			if pid > 0 && want[pid] {
				out = append(out, e)
			}
		}
		return out, err
	}
}
