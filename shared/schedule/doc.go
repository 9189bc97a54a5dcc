// Package schedule is baton's schedule model: the Schedule and Run
// documents, their validation, cron parsing, IANA time zones, and the exact
// DST rules for next-fire computation. It does no I/O.
//
// # Cron parser: robfig/cron/v3, for parsing only
//
// Parse uses github.com/robfig/cron/v3 (the most used Go cron library,
// MIT, stable since 2019) to turn each field into the bit sets of its
// SpecSchedule (Second, Minute, Hour, Dom, Month, Dow, plus a "star" bit that
// marks a field written as "*" or "?"). Its grammar (numbers, names, ranges,
// lists, steps) is well tested, and hand-writing it again would only add bugs.
// baton adds around it:
//
//   - day-of-week 7 = Sunday: the library's field runs 0–6, so "7", "5-7",
//     "FRI-7" and "1/2" are rewritten onto 0 before parsing (Vixie semantics:
//     "a/n" means a through 7);
//   - descriptors and "@every" are handled here: "@every" must be at least
//     one second in whole seconds, and no "TZ=" prefix is accepted (the
//     library panics on "TZ=x" without a space, and the zone belongs in the
//     schedule's timeZone field);
//   - each field is parsed alone first, so an error names the field;
//   - expressions that never fire ("0 0 30 2 *") are refused.
//
// The library's own Next is not used: it walks in the zone with time.Date,
// whose choice in a DST gap or overlap is unspecified, and in Europe/Berlin in
// 2026 it never fires "30 2 * * *" on 29 March (02:30 does not exist) and
// fires it twice on 25 October (TestLibraryNextIsNotDSTExact pins this). Next here walks the wall clock
// on civil dates over the library's bit sets and maps each matching wall time
// to an instant explicitly, with the zone's transitions (time.ZoneBounds):
//
//   - a wall time inside a spring-forward gap fires once, at the first
//     instant after the gap;
//   - a wall time that repeats in a fall-back hour fires at its first
//     occurrence only.
//
// "@every d" ignores wall clocks altogether: it fires at the instants that
// are whole multiples of d after the Unix epoch.
//
// Day matching follows the Vixie rule: if both day-of-month and day-of-week
// are restricted, a day matches if either does. A field counts as
// unrestricted only when written "*" or "?" (so "*/2" restricts, unlike the
// historical Vixie first-character test).
//
// # Validation
//
// Schedule.Normalize fills defaults and validates every field, returning a
// *FieldError whose Field is the JSON path at fault; DecodeSchedule decodes
// JSON strictly with the same error type. IsAllowedHost is the SSRF guard for
// http targets, used both when a schedule is written and before each request.
package schedule
