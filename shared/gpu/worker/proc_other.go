//go:build !unix

package worker

import (
	"os/exec"
	"time"
)

// setGroup: without process groups, exec's default kill of the direct
// child is the best available, and there is no SIGTERM to give grace.
func setGroup(cmd *exec.Cmd, grace func() time.Duration) {}
