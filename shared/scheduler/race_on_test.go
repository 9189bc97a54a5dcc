//go:build race

package scheduler_test

// raceBuild: the race detector also instruments the embedded FerretDB,
// which makes every database call several times slower.
const raceBuild = true
