package mongostore

// catalog implements store.Catalog.
type catalog struct{ s *Store }
