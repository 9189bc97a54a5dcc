package schedule

import "time"

// MaxBackfillFires bounds the fire times one :backfill call covers: a
// longer window answers a continuation (NextPageToken) for the rest, so
// one call writes (and a dry run reads) at most this many runs.
const MaxBackfillFires = 1000

// BackfillRequest asks for the runs of a schedule's fire times in
// [Start, End).
type BackfillRequest struct {
	// Start and End bound the window; End is exclusive and must not be in
	// the future.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// DryRun lists the fire times and which already have a run, writing
	// nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// PageToken continues a window longer than MaxBackfillFires: the
	// previous answer's NextPageToken.
	PageToken string `json:"pageToken,omitempty"`
}

// BackfillFire is one fire time of a backfill and its run.
type BackfillFire struct {
	FireTime time.Time `json:"fireTime"`
	// Run is the run's deterministic id: the same as a scheduled run of
	// that fire time, so a fire time that already ran is not run again.
	Run string `json:"run"`
	// Existed is true when the run was already there (it ran, or an
	// earlier backfill recorded it); Status is then its status.
	Existed bool      `json:"existed"`
	Status  RunStatus `json:"status,omitempty"`
}

// BackfillResult is the answer of :backfill.
type BackfillResult struct {
	Schedule string         `json:"schedule"`
	DryRun   bool           `json:"dryRun"`
	Fires    []BackfillFire `json:"fires"`
	// Created counts runs recorded by this call (0 on a dry run, and on a
	// repeat); Existing counts fire times that had a run already.
	Created  int `json:"created"`
	Existing int `json:"existing"`
	// NextPageToken, when set, continues the window after the last fire
	// time listed.
	NextPageToken string `json:"nextPageToken"`
}
