// Package testuser runs a test binary again as the unprivileged user the
// CI creates (.ci/install-test-deps.sh), for the tests whose mechanisms
// differ without root (the sandbox's, serve's peer checks). It is for
// tests only, of this module and of cmd/agentproc; Linux only.
package testuser
