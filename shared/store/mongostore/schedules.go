package mongostore

// schedules implements store.Schedules.
type schedules struct{ s *Store }
