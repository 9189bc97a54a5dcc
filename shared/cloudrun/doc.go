// Package cloudrun is the Run Admin API v2 client of cloudRunJob targets:
// the official client (cloud.google.com/go/run/apiv2), narrowed to the
// calls baton makes. Pointed at emulator/runjobs locally (ClientOptions of
// CLOUD_RUN_EMULATOR_HOST), at run.googleapis.com in the cloud.
package cloudrun
