// Package secretmask holds the one rule for hiding a password that a
// program was given in text it prints: replace each place the password
// appears, except where it is only part of a longer word.
//
// A password "WRONG" must not turn Redis's answer "WRONGPASS invalid
// username-password pair" into "xxxxxPASS ...": the masked text would no
// longer say what went wrong, and it would tell the reader the password
// (they see where it was cut). A place is part of a word when a letter,
// digit or '_' directly precedes a password that starts with one, or
// directly follows a password that ends with one. The password's places
// as a credential (a URL's or a DSN's user-info) are redacted by their
// position, not by this rule. This package imports only the standard
// library.
package secretmask
