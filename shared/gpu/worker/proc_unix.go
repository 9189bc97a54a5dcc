//go:build unix

package worker

import (
	"os/exec"
	"syscall"
	"time"
)

// setGroup runs the command in its own process group, so a stop reaches
// the children of `sh -c` too and no grandchild keeps the output pipes
// open. A stop is SIGTERM to the group, so the command can save its work
// (a preempted job resumes later), then SIGKILL after grace.
// grace is asked at the stop, since it depends on why (self-fencing gets
// none: SIGKILL at once).
func setGroup(cmd *exec.Cmd, grace func() time.Duration) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		pid := cmd.Process.Pid
		g := grace()
		if g <= 0 {
			return syscall.Kill(-pid, syscall.SIGKILL)
		}
		err := syscall.Kill(-pid, syscall.SIGTERM)
		time.AfterFunc(g, func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
		return err
	}
}
