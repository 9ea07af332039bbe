//go:build !cgo

package cdefs

// Available is false: without cgo region.h cannot be compiled, and the layout
// test says so instead of building nothing.
const Available = false

// Field is one member of a struct in region.h as the C compiler lays it out.
type Field struct {
	Name   string
	Offset uint64
	Size   uint64
}

// Fields returns nothing without cgo.
func Fields() []Field { return nil }

// Constants returns nothing without cgo.
func Constants() map[string]uint64 { return nil }

// Strings returns nothing without cgo.
func Strings() map[string]string { return nil }

// PathPrefix returns "" without cgo.
func PathPrefix() string { return "" }
