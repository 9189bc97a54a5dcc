package store

// GPU is the GPU queue: jobs, worker slots, and the fenced claims and
// callbacks between them.
type GPU interface{}
