package color

// Ignored: constants in test files are not part of the enum.
const testOnly Color = "test"
