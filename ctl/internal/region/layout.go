package region

// This file mirrors preload/region.h, the one definition of the layout.
// Every constant and offset below is checked against what the C compiler
// makes of region.h by TestLayoutMatchesC (through the cdefs package), so a
// change on either side without the other fails `make test`.

const (
	Magic         = 0x454e494c50414548 // "HEAPLINE" read as a little-endian u64 (HL_MAGIC)
	Version       = 2                  // HL_VERSION
	HeaderSize    = 1024               // HL_HEADER_SIZE
	SlotSize      = 64                 // HL_SLOT_SIZE
	SlotsMax      = 65536              // HL_SLOTS_MAX
	CommandMax    = 256                // HL_COMMAND_MAX
	ObjectMax     = 256                // HL_OBJECT_MAX
	FlagExited    = 1                  // HL_FLAG_EXITED
	ModeGlibc     = 1                  // HL_MODE_GLIBC
	ModeGeneric   = 2                  // HL_MODE_GENERIC
	ModeBypassed  = 3                  // HL_MODE_BYPASSED
	PathPrefix    = "heapline."        // basename part of HL_PATH_PREFIX
	MaxRegionSize = HeaderSize + SlotsMax*SlotSize + StacksMax*StackSize + ObjectsMax*ObjectSize + PyCodesMax*PyCodeSize + PyArenasDefault*PyArenaSize

	// A slot's fast-path words: operations in bits 0..49, chunk bytes in
	// units of 16 modulo 2^14 units in bits 50..63 (region.h, hl_slot).
	WordShift     = 50               // HL_WORD_SHIFT
	WordUnit      = 16               // HL_WORD_UNIT
	WordCountMask = 1<<WordShift - 1 // HL_WORD_COUNT_MASK
	WordBatch     = 1 << 18          // HL_WORD_BATCH
	ChunkBias     = 8                // HL_CHUNK_BIAS: slot bytes are usable + 8

	// The sampled profile (region.h, hl_stack and hl_object).
	StackFrames    = 64        // HL_STACK_FRAMES
	WeightShift    = 16        // HL_WEIGHT_SHIFT
	StacksDefault  = 1024      // HL_STACKS_DEFAULT
	ObjectsDefault = 256       // HL_OBJECTS_DEFAULT
	SampleDefault  = 512 << 10 // HL_SAMPLE_DEFAULT
	StacksMax      = 65536     // HL_STACKS_MAX
	ObjectsMax     = 4096      // HL_OBJECTS_MAX
	StackSize      = 64 + 8*StackFrames
	ObjectSize     = 256
	ObjectPathMax  = 224

	// The stacks' copy at the peak (region.h, header line 14; count_peak.c):
	// taken each time the published total rises by the step,
	// max(PeakStepMin, peak/PeakStepDiv).
	PeakStepMin = 1 << 20 // HL_PEAK_STEP_MIN
	PeakStepDiv = 100     // HL_PEAK_STEP_DIV
	// Python frames (region.h, hl_pycode): a frame with PyFrameBit set
	// holds a code table index in bits 32..62 and a line in bits 0..31.
	PyFrameBit         = 1 << 63    // HL_PYFRAME_BIT
	PyCodeNone         = 0x7fffffff // HL_PYCODE_NONE
	PyCodesDefault     = 2048       // HL_PYCODES_DEFAULT
	PyCodesMax         = 65536      // HL_PYCODES_MAX
	PyCodeSize         = 512
	PyCodeNameMax      = 128
	PyCodeFileMax      = 360
	PyFlagFrames       = 1 // HL_PY_FRAMES
	PyFlagUnknown      = 2 // HL_PY_UNKNOWN
	PyFlagObjects      = 4 // HL_PY_OBJECTS
	PyFlagFreeThreaded = 8 // HL_PY_FREETHREADED

	PyMissingShift = 8 // HL_PY_MISSING_SHIFT: with PyFlagUnknown, what was missed (PyMissing)

	// pymalloc's live arenas (region.h, hl_pyarena).
	PyFlagArenas    = 16    // HL_PY_ARENAS
	PyArenasDefault = 16384 // HL_PYARENAS
	PyArenaSize     = 16
)

// Offsets in struct hl_header.
const (
	offMagic           = 0
	offVersion         = 8
	offHeaderSize      = 12
	offSlotSize        = 16
	offNSlots          = 20
	offRegionSize      = 24
	offPID             = 32
	offUID             = 36
	offStartTicks      = 40
	offStartNS         = 48
	offPeakSlack       = 56
	offSeq             = 64
	offFoldLock        = 72
	offFlags           = 76
	offThreadsSeen     = 80
	offThreadsLive     = 88
	offThreadsMax      = 96
	offOverflowThreads = 104
	offExitNS          = 112
	offPidNS           = 120
	offRetired         = 128
	offTimeNS          = 160
	offMappedBytes     = 168
	offPeakMappedBytes = 176
	offMappings        = 184
	offPublishedLive   = 192
	offPeakLive        = 200
	offMode            = 208
	offEpochPeak       = 216
	offCommand         = 256
	offBypassedBy      = 512
	offProfOffset      = 768
	offSampleRate      = 776
	offNStacks         = 784
	offNObjects        = 788
	offSamples         = 792
	offSamplesLost     = 800
	offObjectsUsed     = 808
	offSamplesCut      = 816
	offStacksUsed      = 824
	offPyCodesUsed     = 828
	offDeadSeen        = 960
	offPeakCopySeq     = 896
	offPeakCopyLive    = 904
	offPeakCopyNext    = 912
	offPeakCopyStep    = 920
	offPeakCopies      = 928
	offPeakCopyNS      = 936
	offSampleArena     = 944
	offSampleArenaSize = 952
	offPyAllocs        = 832
	offPyFrees         = 840
	offPyAllocBytes    = 848
	offPyFreeBytes     = 856
	offPyCodeOffset    = 864
	offNPyCodes        = 872
	offPyVersion       = 876
	offPyFlags         = 880
	offPyEvalCold      = 884
	offPyArenaOffset   = 968
	offNPyArenas       = 976
	offPyArenasUsed    = 980
	offPyArenasLost    = 984
	offPyArenasLive    = 992
	offPyExitObjects   = 1000
	offPyExitBytes     = 1008
)

// Offsets in struct hl_pyarena.
const (
	offPyArenaAddress = 0
	offPyArenaSize    = 8
)

// Offsets in struct hl_pycode.
const (
	offPyCodeCode      = 0
	offPyCodeIdent     = 8
	offPyCodeState     = 16
	offPyCodeFirstLine = 20
	offPyCodeName      = 24
	offPyCodeFile      = 152
)

// Offsets in struct hl_stack.
const (
	offStackHash         = 0
	offStackState        = 8
	offStackNFrames      = 12
	offStackAllocObjects = 16
	offStackAllocBytes   = 24
	offStackFreeObjects  = 32
	offStackFreeBytes    = 40
	offStackSamples      = 48
	offStackPeakBytes    = 56
	offStackFrames       = 64
)

// Offsets in struct hl_object.
const (
	offObjectStart = 0
	offObjectEnd   = 8
	offObjectBias  = 16
	offObjectPath  = 32
)

// Offsets in struct hl_counters (header.retired).
const (
	offAllocs         = 0
	offFrees          = 8
	offAllocatedBytes = 16
	offFreedBytes     = 24
	countersSize      = 32
)

// Offsets in struct hl_slot.
const (
	offSlotAllocWord  = 0
	offSlotFreeWord   = 8
	offSlotAllocBytes = 16
	offSlotFreeBytes  = 24
	offSlotAllocs     = 32
	offSlotFrees      = 40
	offSlotSyncedLive = 48
	offSlotTID        = 56
	offSlotState      = 60
)

// field is where the reader finds one member of a region.h struct.
type field struct{ off, size uint64 }

// goFields lists every member this package reads or writes (tests write
// whole regions), with its offset and size, keyed "struct.member" like
// cdefs.Fields; TestLayoutMatchesC compares the two.
var goFields = map[string]field{
	"hl_counters.allocs":          {offAllocs, 8},
	"hl_counters.frees":           {offFrees, 8},
	"hl_counters.allocated_bytes": {offAllocatedBytes, 8},
	"hl_counters.freed_bytes":     {offFreedBytes, 8},

	"hl_slot.alloc_word":  {offSlotAllocWord, 8},
	"hl_slot.free_word":   {offSlotFreeWord, 8},
	"hl_slot.alloc_bytes": {offSlotAllocBytes, 8},
	"hl_slot.free_bytes":  {offSlotFreeBytes, 8},
	"hl_slot.allocs":      {offSlotAllocs, 8},
	"hl_slot.frees":       {offSlotFrees, 8},
	"hl_slot.synced_live": {offSlotSyncedLive, 8},
	"hl_slot.tid":         {offSlotTID, 4},
	"hl_slot.state":       {offSlotState, 4},

	"hl_header.magic":             {offMagic, 8},
	"hl_header.version":           {offVersion, 4},
	"hl_header.header_size":       {offHeaderSize, 4},
	"hl_header.slot_size":         {offSlotSize, 4},
	"hl_header.nslots":            {offNSlots, 4},
	"hl_header.region_size":       {offRegionSize, 8},
	"hl_header.pid":               {offPID, 4},
	"hl_header.uid":               {offUID, 4},
	"hl_header.start_ticks":       {offStartTicks, 8},
	"hl_header.start_ns":          {offStartNS, 8},
	"hl_header.peak_slack":        {offPeakSlack, 8},
	"hl_header.seq":               {offSeq, 8},
	"hl_header.fold_lock":         {offFoldLock, 4},
	"hl_header.flags":             {offFlags, 4},
	"hl_header.threads_seen":      {offThreadsSeen, 8},
	"hl_header.threads_live":      {offThreadsLive, 8},
	"hl_header.threads_max":       {offThreadsMax, 8},
	"hl_header.overflow_threads":  {offOverflowThreads, 8},
	"hl_header.exit_ns":           {offExitNS, 8},
	"hl_header.pid_ns":            {offPidNS, 8},
	"hl_header.retired":           {offRetired, countersSize},
	"hl_header.time_ns":           {offTimeNS, 8},
	"hl_header.mapped_bytes":      {offMappedBytes, 8},
	"hl_header.peak_mapped_bytes": {offPeakMappedBytes, 8},
	"hl_header.mappings":          {offMappings, 8},
	"hl_header.published_live":    {offPublishedLive, 8},
	"hl_header.peak_live":         {offPeakLive, 8},
	"hl_header.mode":              {offMode, 4},
	"hl_header.epoch_peak":        {offEpochPeak, 8},
	"hl_header.command":           {offCommand, CommandMax},
	"hl_header.bypassed_by":       {offBypassedBy, ObjectMax},
	"hl_header.prof_offset":       {offProfOffset, 8},
	"hl_header.sample_rate":       {offSampleRate, 8},
	"hl_header.nstacks":           {offNStacks, 4},
	"hl_header.nobjects":          {offNObjects, 4},
	"hl_header.samples":           {offSamples, 8},
	"hl_header.samples_lost":      {offSamplesLost, 8},
	"hl_header.objects_used":      {offObjectsUsed, 8},
	"hl_header.samples_cut":       {offSamplesCut, 8},
	"hl_header.stacks_used":       {offStacksUsed, 4},
	"hl_header.pycodes_used":      {offPyCodesUsed, 4},
	"hl_header.dead_seen_ns":      {offDeadSeen, 8},
	"hl_header.peak_copy_seq":     {offPeakCopySeq, 8},
	"hl_header.peak_copy_live":    {offPeakCopyLive, 8},
	"hl_header.peak_copy_next":    {offPeakCopyNext, 8},
	"hl_header.peak_copy_step":    {offPeakCopyStep, 8},
	"hl_header.peak_copies":       {offPeakCopies, 8},
	"hl_header.peak_copy_ns":      {offPeakCopyNS, 8},
	"hl_header.sample_arena":      {offSampleArena, 8},
	"hl_header.sample_arena_size": {offSampleArenaSize, 8},
	"hl_header.py_allocs":         {offPyAllocs, 8},
	"hl_header.py_frees":          {offPyFrees, 8},
	"hl_header.py_alloc_bytes":    {offPyAllocBytes, 8},
	"hl_header.py_free_bytes":     {offPyFreeBytes, 8},
	"hl_header.pycode_offset":     {offPyCodeOffset, 8},
	"hl_header.npycodes":          {offNPyCodes, 4},
	"hl_header.py_version":        {offPyVersion, 4},
	"hl_header.py_flags":          {offPyFlags, 4},
	"hl_header.py_eval_cold":      {offPyEvalCold, 4},
	"hl_header.pyarena_offset":    {offPyArenaOffset, 8},
	"hl_header.npyarenas":         {offNPyArenas, 4},
	"hl_header.pyarenas_used":     {offPyArenasUsed, 4},
	"hl_header.pyarenas_lost":     {offPyArenasLost, 8},
	"hl_header.pyarenas_live":     {offPyArenasLive, 8},
	"hl_header.py_exit_objects":   {offPyExitObjects, 8},
	"hl_header.py_exit_bytes":     {offPyExitBytes, 8},

	"hl_pyarena.address": {offPyArenaAddress, 8},
	"hl_pyarena.size":    {offPyArenaSize, 8},

	"hl_pycode.code":      {offPyCodeCode, 8},
	"hl_pycode.ident":     {offPyCodeIdent, 8},
	"hl_pycode.state":     {offPyCodeState, 4},
	"hl_pycode.firstline": {offPyCodeFirstLine, 4},
	"hl_pycode.name":      {offPyCodeName, PyCodeNameMax},
	"hl_pycode.file":      {offPyCodeFile, PyCodeFileMax},

	"hl_stack.hash":          {offStackHash, 8},
	"hl_stack.state":         {offStackState, 4},
	"hl_stack.nframes":       {offStackNFrames, 4},
	"hl_stack.alloc_objects": {offStackAllocObjects, 8},
	"hl_stack.alloc_bytes":   {offStackAllocBytes, 8},
	"hl_stack.free_objects":  {offStackFreeObjects, 8},
	"hl_stack.free_bytes":    {offStackFreeBytes, 8},
	"hl_stack.samples":       {offStackSamples, 8},
	"hl_stack.peak_bytes":    {offStackPeakBytes, 8},
	"hl_stack.frames":        {offStackFrames, 8 * StackFrames},

	"hl_object.start": {offObjectStart, 8},
	"hl_object.end":   {offObjectEnd, 8},
	"hl_object.bias":  {offObjectBias, 8},
	"hl_object.path":  {offObjectPath, ObjectPathMax},
}

// goConstants are the macros and struct sizes of region.h as this package
// knows them, keyed like cdefs.Constants.
var goConstants = map[string]uint64{
	"HL_MAGIC":           Magic,
	"HL_VERSION":         Version,
	"HL_HEADER_SIZE":     HeaderSize,
	"HL_SLOT_SIZE":       SlotSize,
	"HL_SLOTS_MAX":       SlotsMax,
	"HL_COMMAND_MAX":     CommandMax,
	"HL_OBJECT_MAX":      ObjectMax,
	"HL_STACK_FRAMES":    StackFrames,
	"HL_WEIGHT_SHIFT":    WeightShift,
	"HL_STACKS_DEFAULT":  StacksDefault,
	"HL_OBJECTS_DEFAULT": ObjectsDefault,
	"HL_SAMPLE_DEFAULT":  SampleDefault,
	"HL_STACKS_MAX":      StacksMax,
	"HL_OBJECTS_MAX":     ObjectsMax,
	"sizeof hl_stack":    StackSize,
	"sizeof hl_object":   ObjectSize,
	"HL_FLAG_EXITED":     FlagExited,
	"HL_MODE_GLIBC":      ModeGlibc,
	"HL_MODE_GENERIC":    ModeGeneric,
	"HL_MODE_BYPASSED":   ModeBypassed,
	"HL_WORD_SHIFT":      WordShift,
	"HL_WORD_UNIT":       WordUnit,
	"HL_WORD_COUNT_MASK": WordCountMask,
	"HL_WORD_BATCH":      WordBatch,
	"HL_CHUNK_BIAS":      ChunkBias,
	"HL_PEAK_STEP_MIN":   PeakStepMin,
	"HL_PEAK_STEP_DIV":   PeakStepDiv,
	"sizeof hl_header":   HeaderSize,
	"sizeof hl_slot":     SlotSize,
	"sizeof hl_counters": countersSize,
	"HL_PYFRAME_BIT":     PyFrameBit,
	"HL_PYCODE_NONE":     PyCodeNone,
	"HL_PYCODES_DEFAULT": PyCodesDefault,
	"HL_PYCODES_MAX":     PyCodesMax,
	"sizeof hl_pycode":   PyCodeSize,
	"HL_PY_FRAMES":       PyFlagFrames,
	"HL_PY_UNKNOWN":      PyFlagUnknown,
	"HL_PY_OBJECTS":      PyFlagObjects,
	"HL_PY_FREETHREADED": PyFlagFreeThreaded,
	"HL_PY_ARENAS":       PyFlagArenas,
	"HL_PYARENAS":        PyArenasDefault,
	"sizeof hl_pyarena":  PyArenaSize,

	// what the shim missed of a CPython (py_flags >> HL_PY_MISSING_SHIFT)
	"HL_PY_MISSING_SHIFT":   PyMissingShift,
	"HL_PY_MISSING_OFFSETS": PyMissingOffsets,
	"HL_PY_MISSING_VERSION": PyMissingVersion,
	"HL_PY_MISSING_GIL":     PyMissingGIL,
	"HL_PY_MISSING_RUNTIME": PyMissingRuntime,
	"HL_PY_MISSING_OBJECT":  PyMissingObject,
	"HL_PY_MISSING_INTERP":  PyMissingInterp,
	"HL_PY_MISSING_THREAD":  PyMissingThread,
	"HL_PY_MISSING_FRAME":   PyMissingFrame,
	"HL_PY_MISSING_CODE":    PyMissingCode,
	"HL_PY_MISSING_STR":     PyMissingStr,
	"HL_PY_MISSING_TYPES":   PyMissingTypes,
	"HL_PY_MISSING_EVAL":    PyMissingEval,
}

// Offset is where region.h puts member, named "struct.member" as in
// goFields. It is for encoders outside this package (regiontest), which
// write regions by region.h's names; it panics on a name this package
// does not mirror.
func Offset(member string) int {
	f, ok := goFields[member]
	if !ok {
		panic("region: no member " + member + " in layout.go")
	}
	return int(f.off)
}

// ModeName is header.mode's name in the summary, as the shim's JSON
// summary writes it (summary_line.c, hl_mode_name); "" where the shim counts
// nothing, has not booted, or is older than the field.
func ModeName(m uint32) string {
	switch m {
	case ModeGlibc:
		return "glibc"
	case ModeGeneric:
		return "generic"
	case ModeBypassed:
		return "bypassed"
	}
	return ""
}
