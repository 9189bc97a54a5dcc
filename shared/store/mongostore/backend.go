package mongostore

import "github.com/baton-cron/baton/shared/store"

// The Store is a store.Backend; each view is a small value over the
// Store's metered collections, so views cost nothing to make.
var _ store.Backend = (*Store)(nil)

// Schedules returns the scheduler's view of the schedules.
func (s *Store) Schedules() store.Schedules { return schedules{s: s} }

// Runs returns the scheduler's view of the runs.
func (s *Store) Runs() store.Runs { return runs{s: s} }

// Catalog returns the Schedules API's view.
func (s *Store) Catalog() store.Catalog { return catalog{s: s} }

// Calendars returns the calendars' view.
func (s *Store) Calendars() store.Calendars { return calendars{s: s} }

// GPU returns the GPU queue.
func (s *Store) GPU() store.GPU { return gpuQueue{s: s} }

// named is the collection name with the Store's CollectionPrefix.
func (s *Store) named(name string) *Collection { return s.Collection(s.prefix + name) }
