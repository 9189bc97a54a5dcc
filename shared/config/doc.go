// Package config is the one place baton reads its environment. Every
// variable is declared in Vars with the components that need it, so the
// README's configuration reference and the Terraform check in tests/ can be
// compared against the code instead of against memory.
package config
