// Package color is enumtest's fixture: an enum declared in each of the
// forms Constants reads.
package color

// Color is the enum.
type Color string

// Typed constants.
const (
	Red   Color = "red"
	Green Color = "green"
)

// A conversion, alone in its group.
const Blue = Color("blue")

// Other constants, of other types or untyped, in groups of their own.
const (
	Max         = 3
	Name string = "color"
)
