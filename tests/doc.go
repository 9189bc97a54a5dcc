// Package tests holds baton's end-to-end tests. They start the local stack
// (emulator/stack) in-process, with real emulators behind real sockets, and
// drive it over HTTP the way an operator or Cloud Scheduler would; the
// console's test drives it through headless Chromium (chromedp), as an
// operator's browser would. They also check that the README and the
// Terraform stay true to the code.
package tests
