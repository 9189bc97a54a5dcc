// Package schedule is baton's schedule model: the Schedule and Run
// documents, their validation, cron parsing, IANA time zones, and the exact
// DST rules for next-fire computation. It does no I/O.
package schedule
