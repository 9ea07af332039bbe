package traceprof

// sizer chooses how many bytes of the stack the probes copy for each
// sample (bpf.Tracer.SetStackCopy). The copy is most of what a sample
// costs in the probe, and most stacks need a small part of the 16 KiB
// that any may need: so the walks show what is needed. The first learn
// samples are copied whole; from then on, twice the most any walk has
// read, rounded up to a step, at least floor. A walk that needed more
// than its copy held is cut short (its sample keeps the frames it has):
// the copy goes back to whole, and learning starts again.
type sizer struct {
	full    int // the most the probes can copy (bpf.StackCopy)
	want    int // what they copy now
	deepest int // the most bytes a walk read since learning began
	seen    int // samples since learning began
	cut     uint64
}

const (
	sizerLearn = 64   // samples copied whole before the copy is cut down
	sizerStep  = 512  // the copy's sizes are multiples of this
	sizerFloor = 1024 // and never smaller
)

func newSizer(full int) *sizer { return &sizer{full: full, want: full} }

// observe takes one walk: copied, the bytes its copy held; used, what the
// walk read of them; short, whether it needed more. It returns the copy
// to ask for from now on, and whether that differs from before.
func (z *sizer) observe(copied int, used int, short bool) (want int, changed bool) {
	old := z.want
	switch {
	case short && copied < z.full && copied >= z.want:
		// Cut by the copy's size (not by the stack's top, which ends a
		// copy short of what was asked).
		z.cut++
		z.want, z.deepest, z.seen = z.full, 0, 0
	default:
		if !short { // a whole copy's walk cut short: nothing more to ask
			z.deepest = max(z.deepest, used)
		}
		z.seen++
		if z.seen >= sizerLearn {
			n := (2*z.deepest + sizerStep - 1) / sizerStep * sizerStep
			z.want = min(max(n, sizerFloor), z.full)
		}
	}
	return z.want, z.want != old
}
