package region

// What the external tests (package region_test, which write regions with
// regiontest) may swap: the clock, the reader's euid and the seqlock's
// retry budget.
var (
	MonotonicNS = &monotonicNS
	Geteuid     = &geteuid
	SeqTries    = &seqTries
	SeqYield    = &seqYield
)
