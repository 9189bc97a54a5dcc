// Package metrics holds baton's OpenTelemetry instruments and the two ways
// they leave the process.
//
// The domain packages (scheduler, lease, gpu) record through a *Set; they
// never see an exporter. Which exporter runs is the binary's choice:
//
//   - In the cloud, Open exports to Cloud Monitoring with Google's exporter,
//     on a periodic reader, and Shutdown flushes what is left: a serverless
//     instance may be stopped between two periods, and a function that
//     served one request would otherwise export nothing.
//   - Locally (baton local), Prometheus serves the same instruments as text
//     at $BATON_URL/metrics.
//
// Instrument names are the Prometheus names (baton_runs_total,
// baton_run_duration_seconds, …) in both places, so a dashboard, an alert
// and docs/observability.md use one name per metric: the Prometheus
// exporter is told not to add suffixes of its own, and Cloud Monitoring
// shows them as workload.googleapis.com/<name>.
//
// Cardinality is bounded by construction: labels are enums (status, source,
// lease kind, slot state) and the schedule id, which Options.ScheduleLabel
// (BATON_METRICS_SCHEDULE_LABEL=false) turns off for deployments with many
// schedules. No label carries a run id, a lease name or a job id.
package metrics
