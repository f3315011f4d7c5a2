// Package storetest is the conformance suite of persistence.Store: one set
// of tests that every store (MySQL, SQLite, or a third party's) runs from
// its own _test.go with Run.
//
// Each test gets a fresh store from the caller's constructor, so tests run
// in parallel and isolate themselves (a private database or file per
// test).
package storetest
