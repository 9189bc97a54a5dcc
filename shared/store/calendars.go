package store

import (
	"context"

	"github.com/baton-cron/baton/shared/schedule"
)

// Calendars is the view of the calendars: the API's create, replace, read,
// list and delete, and the tick's read of the calendars its due schedules
// name. Validation, versions and timestamps are the caller's
// (shared/catalog).
type Calendars interface {
	// CreateCalendar inserts c under its id.
	//
	// Guard: no calendar has c.ID.
	//
	// Errors: ErrConflict (wrapped) when the id is taken by another
	// calendar (or one that cannot be shown to be c).
	//
	// Lost answer: the id is read back; a stored calendar equal to c is
	// this create, and it returns nil.
	CreateCalendar(ctx context.Context, c *schedule.Calendar) error

	// ReplaceCalendar replaces the stored calendar of next's id with next.
	//
	// Guard: the stored version is still version (compare-and-set).
	//
	// Errors: ErrConflict (wrapped) when the version moved or the calendar
	// is gone.
	//
	// Lost answer: ErrUnknownOutcome (wrapped); not retried.
	ReplaceCalendar(ctx context.Context, next *schedule.Calendar, version int64) error

	// GetCalendar reads one calendar by id, or returns ErrNotFound
	// (wrapped). It writes nothing.
	GetCalendar(ctx context.Context, id string) (schedule.Calendar, error)

	// GetCalendars reads the calendars of ids in one query, by id; an id
	// with no calendar is absent from the map, not an error. It reads at
	// most len(ids) documents and writes nothing.
	GetCalendars(ctx context.Context, ids []string) (map[string]*schedule.Calendar, error)

	// ListCalendars reads one page of calendars in id order, as
	// Catalog.ListSchedules pages schedules (keyset cursor; a page of n
	// reads n documents). It writes nothing.
	// sel filters by labels as Catalog.ListSchedules' does.
	ListCalendars(ctx context.Context, limit int, token string, sel ...schedule.LabelTerm) (page []schedule.Calendar, next string, err error)

	// DeleteCalendar removes calendar id.
	//
	// Guard: the calendar exists and, when version is not 0, its stored
	// version is version.
	//
	// Errors: ErrConflict (wrapped) when nothing matched.
	//
	// Lost answer: ErrUnknownOutcome (wrapped).
	DeleteCalendar(ctx context.Context, id string, version int64) error
}
