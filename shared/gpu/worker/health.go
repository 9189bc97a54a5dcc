package worker

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/httpapi"
)

// serveHealth reports the worker's state and, where there is a GPU, what
// nvidia-smi says about it.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	job := ""
	if s.cur != nil {
		job = s.cur.req.JobID
	}
	draining := s.draining
	s.mu.Unlock()
	out := map[string]any{"status": "ok", "busy": job != "", "job": job, "draining": draining, "stats": s.Stats(), "gpu": gpuInfo(r.Context())}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// gpuInfo runs nvidia-smi when it exists; on a CPU-only host it says so.
func gpuInfo(ctx context.Context) string {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "none (no nvidia-smi on PATH)"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, path, "--query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu", "--format=csv,noheader").CombinedOutput()
	if err != nil {
		return "nvidia-smi failed: " + strings.TrimSpace(string(b)) + ": " + err.Error()
	}
	return strings.TrimSpace(string(b))
}
