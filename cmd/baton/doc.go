// Command baton is the operator's and developer's tool: `baton local` runs
// the whole system against embedded emulators, `baton daemon` ticks at
// second granularity, and the other subcommands manage schedules, runs,
// leases and the GPU queue over HTTP, or measure baton (`baton bench`).
//
// Each subcommand group lives in its own file and adds itself to the root
// command in init.
package main
