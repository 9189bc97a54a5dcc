package mongostore

// runs implements store.Runs.
type runs struct{ s *Store }
