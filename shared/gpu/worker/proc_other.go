//go:build !unix

package worker

import "os/exec"

// setGroup: without process groups, exec's default kill of the direct
// child is the best available.
func setGroup(cmd *exec.Cmd) {}
