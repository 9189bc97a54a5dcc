//go:build !race

package scheduler_test

// raceBuild: see race_on_test.go.
const raceBuild = false
