package redisconn

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Config
	}{
		{"redis://127.0.0.1:6379", Config{Mode: Single, Addrs: []string{"127.0.0.1:6379"}}},
		{"redis://localhost", Config{Mode: Single, Addrs: []string{"localhost:6379"}}},
		{"redis://localhost/", Config{Mode: Single, Addrs: []string{"localhost:6379"}}},
		{"REDIS://h:1/3", Config{Mode: Single, Addrs: []string{"h:1"}, DB: 3}},
		{"redis://[::1]:7000/2", Config{Mode: Single, Addrs: []string{"[::1]:7000"}, DB: 2}},
		{"redis://[::1]", Config{Mode: Single, Addrs: []string{"[::1]:6379"}}},
		{"redis://app:p%40ss%3Aw%2Frd@h:6380/1", Config{Mode: Single, Addrs: []string{"h:6380"}, Username: "app", Password: "p@ss:w/rd", DB: 1}},
		{"redis://:only-pass@h", Config{Mode: Single, Addrs: []string{"h:6379"}, Password: "only-pass"}},
		{"redis://app@h", Config{Mode: Single, Addrs: []string{"h:6379"}, Username: "app"}},
		{"redis://h?dial_timeout=2s&read_timeout=500ms&write_timeout=1s", Config{Mode: Single, Addrs: []string{"h:6379"},
			DialTimeout: 2 * time.Second, ReadTimeout: 500 * time.Millisecond, WriteTimeout: time.Second}},
		{"rediss://app:pw@h:6380/0?ca=/ca.pem&cert=/c.pem&key=/k.pem&server_name=redis.internal", Config{Mode: Single,
			Addrs: []string{"h:6380"}, Username: "app", Password: "pw",
			TLS: &TLSFiles{CA: "/ca.pem", Cert: "/c.pem", Key: "/k.pem", ServerName: "redis.internal"}}},
		{"rediss://h", Config{Mode: Single, Addrs: []string{"h:6379"}, TLS: &TLSFiles{}}},
		{"redis+sentinel://s1,s2:26380/mymaster", Config{Mode: Sentinel, Addrs: []string{"s1:26379", "s2:26380"}, MasterName: "mymaster"}},
		{"redis+sentinel://app:pw@s1:26379/mymaster/4?sentinel_user=sen&sentinel_password=spw", Config{Mode: Sentinel,
			Addrs: []string{"s1:26379"}, MasterName: "mymaster", DB: 4, Username: "app", Password: "pw",
			SentinelUsername: "sen", SentinelPassword: "spw"}},
		{"rediss+sentinel://s1/m?ca=/ca.pem", Config{Mode: Sentinel, Addrs: []string{"s1:26379"}, MasterName: "m", TLS: &TLSFiles{CA: "/ca.pem"}}},
		{"redis+cluster://app:pw@h1:7000,h2:7001,h3", Config{Mode: Cluster, Addrs: []string{"h1:7000", "h2:7001", "h3:6379"}, Username: "app", Password: "pw"}},
		{"rediss+cluster://h1:7000/?server_name=c", Config{Mode: Cluster, Addrs: []string{"h1:7000"}, TLS: &TLSFiles{ServerName: "c"}}},
	} {
		got, err := Parse(tc.url)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.url, err)
			continue
		}
		if diff := cmp.Diff(&tc.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.url, diff)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "want scheme://"},
		{"127.0.0.1:6379", "want scheme://"},
		{"http://h", `unknown scheme "http"`},
		{"redis://", "no host"},
		{"redis://app:pw@", "no host"},
		{"redis://h1,h2", "several hosts"},
		{"redis+cluster://h1,,h2", "empty host"},
		{"redis://h:0", `port "0"`},
		{"redis://h:99999", `port "99999"`},
		{"redis://h:port", `port "port"`},
		{"redis://::1", "IPv6"},
		{"redis://:6379", "has no name"},
		{"redis://h/x", `database "x"`},
		{"redis://h/-1", `database "-1"`},
		{"redis://h/1/2", "at most a database number"},
		{"redis+cluster://h/1", "a cluster has no database"},
		{"redis+sentinel://h", "no master name"},
		{"redis+sentinel://h/", "no master name"},
		{"redis+sentinel://h/m/x", `database "x"`},
		{"redis://h?ca=/ca.pem", `"ca" needs TLS`},
		{"redis+cluster://h?server_name=x", `"server_name" needs TLS`},
		{"rediss://h?cert=/c.pem", "cert and key go together"},
		{"rediss://h?key=/k.pem", "cert and key go together"},
		{"redis://h?sentinel_password=x", "for redis+sentinel"},
		{"redis://h?frob=1", `unknown parameter "frob"`},
		{"redis://h?ca", `"ca" wants exactly one`},
		{"rediss://h?ca=a&ca=b", `"ca" wants exactly one`},
		{"redis://h?dial_timeout=soon", `dial_timeout="soon"`},
		{"redis://h?dial_timeout=-1s", `dial_timeout="-1s"`},
		{"redis://h?a=%zz", "bad query string"},
		{"redis://app%zz:pw@h", "percent-encoding in the user"},
		{"redis://app:p%zz@h", "percent-encoding in the password"},
		{"redis://app:@h", "empty password"},
	} {
		_, err := Parse(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", tc.url, err, tc.want)
		}
	}
}

// TestParseErrorsHidePasswords: a URL that does not parse is quoted in the
// error without its passwords.
func TestParseErrorsHidePasswords(t *testing.T) {
	for _, u := range []string{
		"redis://app:hunter22@h:port",
		"redis://app:hun/ter22@h/x",
		"app:hunter22@h:6379",
		"redis+sentinel://app:hunter22@h/m?sentinel_password=hunter22&frob=1",
	} {
		_, err := Parse(u)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("Parse(%q): %q shows the password or does not redact", u, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://h:6379/0", "redis://h:6379/0"},
		{"redis://app@h", "redis://app@h"},
		{"redis://app:pw@h/0", "redis://app:xxxxx@h/0"},
		{"redis://:pw@h", "redis://:xxxxx@h"},
		{"redis://app:p@w/d@h/0", "redis://app:xxxxx@h/0"},
		{"rediss+sentinel://a:b@h/m?ca=/x&sentinel_password=s", "rediss+sentinel://a:xxxxx@h/m?ca=/x&sentinel_password=xxxxx"},
		{"a:b@h", "a:xxxxx@h"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestConfigStringAndSecrets(t *testing.T) {
	c, err := Parse("rediss+sentinel://app:pw@s1,s2/mymaster/2?sentinel_password=spw")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.String(), "rediss+sentinel://app@s1:26379,s2:26379/mymaster/2"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"pw", "spw"}, c.Secrets()); diff != "" {
		t.Errorf("Secrets() (-want +got):\n%s", diff)
	}
	c, _ = Parse("redis+cluster://h1:7000")
	if got, want := c.String(), "redis+cluster://h1:7000"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestFromAddr(t *testing.T) {
	c, err := FromAddr("10.0.0.1:6380")
	if err != nil || c.Addrs[0] != "10.0.0.1:6380" || c.Mode != Single {
		t.Errorf("FromAddr = %+v, %v", c, err)
	}
	if _, err := FromAddr("10.0.0.1"); err == nil || !strings.Contains(err.Error(), `"10.0.0.1"`) {
		t.Errorf("FromAddr without a port: %v", err)
	}
}
