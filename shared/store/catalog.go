package store

// Catalog is the Schedules API's view: schedule create, read, list,
// versioned update and delete, and a schedule's run history.
type Catalog interface{}
