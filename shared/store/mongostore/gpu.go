package mongostore

// gpuQueue implements store.GPU.
type gpuQueue struct{ s *Store }
