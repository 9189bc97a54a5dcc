//go:build unix

package worker

import (
	"os/exec"
	"syscall"
)

// setGroup runs the command in its own process group, so a kill reaches
// the children of `sh -c` too and no grandchild keeps the output pipes
// open.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
