// Package readme holds the tests that keep the repository's README.md
// true, so that what it shows cannot drift from what the code does.
//
// TestQuickStart runs the quick start as a reader would, top to bottom:
// `make run` on a free port, then every command of the README's curl
// session, each checked to succeed and to print what the README shows
// (run ids and version hashes aside); then it presses Ctrl-C (SIGINT to
// the whole process group) and checks that `make run` ends without an
// error. It needs make, bash, curl and jq (CI installs them).
//
// TestGoSnippets type-checks the README's Go blocks against the module's
// packages, read as one program top to bottom, each block importing the
// packages it is the first to use.
//
// The package holds tests only.
package readme
