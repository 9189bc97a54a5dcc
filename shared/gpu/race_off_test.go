//go:build !race

package gpu_test

const raceBuild = false
