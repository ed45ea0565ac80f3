// Package version holds this build's Lemon CalVer (YYYY.MM.PATCH), the
// lemonVersion of node.host.info. build.sh may override it with
// -ldflags "-X lemon/version.Version=...".
package version

// Version is the canonical installed Lemon CalVer.
var Version = "2026.11.0"
