// Package enumtest checks baton's typed enums (schedule.RunStatus,
// gpu.JobStatus, …), the way river types rivertype.JobState: a named string
// type, its constants, an All…() list and a Valid() method.
//
// Check reads the constants of the type from the package's source with
// go/ast, so a constant added without being added to the All…() list, or to
// Valid, fails a test instead of being silently refused by validation. It
// also pins that the type changes nothing on the wire: JSON and BSON encode
// each value exactly as the plain string, which is what the stored
// documents and the database's filters hold.
//
// It is for tests only; nothing outside _test.go files imports it.
package enumtest
