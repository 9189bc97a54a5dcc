// Package gpubench measures busy-aware dispatch against round-robin on the
// same job mix, with real workers running real commands (`sleep d`):
// `baton bench gpu` and the package's Go benchmark both call Run.
//
// The mix is N jobs with lognormal (heavy-tailed) durations, scaled so the
// ideal makespan Σd/K hits a target. A backlog is submitted at once and the
// rest arrive at a chosen load, paced by work (the default, which keeps the
// pool busy, as the makespan bound assumes) or as a Poisson stream. So the
// queue's steady state (queue wait) and its drain (makespan) both show.
//
// Busy-aware: jobs go through the Dispatcher, which sends work only to a
// free slot. Round-robin: job i is POSTed to worker i mod K, and the
// workers queue locally (worker.Config.QueueLocally), as a naive pool
// behind a load balancer would.
package gpubench
