package region

// What the shim missed to read a CPython's frames (region.h,
// HL_PY_MISSING_*): the byte at PyMissingShift of the header's py_flags,
// with PyFlagUnknown.
const (
	PyMissingOffsets = 1  // no _Py_DebugOffsets at _PyRuntime
	PyMissingVersion = 2  // their version is not Py_Version's
	PyMissingGIL     = 3  // a free-threaded build
	PyMissingRuntime = 4  // their runtime section's size is not _PyRuntime's
	PyMissingObject  = 5  // their PyObject section is not where it was
	PyMissingInterp  = 6  // an interpreter state's offset past its size
	PyMissingThread  = 7  // a thread state's offset past its size
	PyMissingFrame   = 8  // a frame's offset past its size
	PyMissingCode    = 9  // the code section disagrees with PyCode_Type
	PyMissingStr     = 10 // the str or bytes section disagrees with PyUnicode_Type
	PyMissingTypes   = 11 // PyCode_Type or PyUnicode_Type not exported
	PyMissingEval    = 12 // _PyEval_EvalFrameDefault's size unknown
)

// PyMissing says in words what flags (a header's py_flags) name as
// missed, "" when they name nothing.
func PyMissing(flags uint32) string {
	switch flags >> PyMissingShift & 0xff {
	case PyMissingOffsets:
		return "no _Py_DebugOffsets at the start of _PyRuntime"
	case PyMissingVersion:
		return "its _Py_DebugOffsets give another version"
	case PyMissingGIL:
		return "a free-threaded build"
	case PyMissingRuntime:
		return "its _Py_DebugOffsets' runtime size is not _PyRuntime's (their layout is not the newest known)"
	case PyMissingObject:
		return "its _Py_DebugOffsets' PyObject section is not where the newest known layout has it"
	case PyMissingInterp:
		return "its _Py_DebugOffsets' interpreter state section does not hold its offsets"
	case PyMissingThread:
		return "its _Py_DebugOffsets' thread state section does not hold its offsets"
	case PyMissingFrame:
		return "its _Py_DebugOffsets' frame section does not hold its offsets"
	case PyMissingCode:
		return "its _Py_DebugOffsets' code object section disagrees with PyCode_Type's size"
	case PyMissingStr:
		return "its _Py_DebugOffsets' str or bytes section disagrees with PyUnicode_Type's size"
	case PyMissingTypes:
		return "PyCode_Type or PyUnicode_Type is not exported"
	case PyMissingEval:
		return "_PyEval_EvalFrameDefault's size is not in its symbol table"
	}
	return ""
}
