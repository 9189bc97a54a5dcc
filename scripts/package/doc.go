// Command package writes the Cloud Functions source zip that Terraform
// uploads (make package): the module's go.mod and go.sum, functions/ and
// shared/, without tests, test data, emulator/, cmd/ or tests/.
//
// The zip is deterministic (sorted entries, fixed timestamps), so its hash,
// which Terraform puts in the object name, changes only when the source
// does, and an unchanged tree does not redeploy the functions.
//
// It also adds function.go at the zip's root. The Go functions-framework
// buildpack builds the package at the source root and does not read
// GOOGLE_FUNCTION_SOURCE (cmd/go/functions_framework/lib/lib.go in
// GoogleCloudPlatform/buildpacks); the stub imports functions/, whose init()
// registers every function. See infra/terraform/functions.tf.
//
// Usage:
//
//	go run ./scripts/package [-o dist/functions-source.zip] [-check]
//
// -check extracts the zip into a temporary directory and runs go build
// there, which proves the zip is self-contained: a function importing a
// package left out of it fails here, not in Cloud Build.
package main
