// Package redisconn opens a go-redis client from a URL, for the dagflow
// command: a single server, Sentinel or Cluster, with or without TLS.
//
// The forms:
//
//	redis://[user:pass@]host[:port][/db]
//	rediss://[user:pass@]host[:port][/db][?ca=FILE&cert=FILE&key=FILE&server_name=NAME]
//	redis+sentinel://[user:pass@]h1:26379,h2:26379/MASTER[/db][?sentinel_user=U&sentinel_password=P]
//	rediss+sentinel://...                (the same, over TLS, with the TLS parameters)
//	redis+cluster://[user:pass@]h1:7000,h2:7001
//	rediss+cluster://...                 (the same, over TLS, with the TLS parameters)
//
// The port defaults to 6379 (26379 for Sentinel). user:pass are those of
// the data nodes (AUTH or an ACL user; a password alone is ":pass@").
// Sentinel's own credentials, if it has any, are the sentinel_user and
// sentinel_password parameters. User names and passwords are
// percent-decoded, so a password holding '@', ':' or '/' is written
// %40, %3A, %2F. TLS is version 1.2 or later; ca is a PEM file of the
// certificate authorities to trust instead of the system's, cert and key
// a client certificate for servers that ask for one (both or neither),
// server_name the name to verify the server's certificate against when it
// is not the host in the URL. The parameters dial_timeout, read_timeout
// and write_timeout take Go durations (5s, 500ms). Any other parameter is
// an error, as are TLS parameters in a URL that does not use TLS.
//
// No error or description made here holds a password: Config.String and
// Redact print the URL with its passwords replaced by "xxxxx".
package redisconn
