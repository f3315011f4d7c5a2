package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/api/client"
)

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://host", "http://", "http://a b"} {
		if _, err := client.New(u, client.Options{}); err == nil || !strings.Contains(err.Error(), "client: base URL") {
			t.Errorf("New(%q) = %v, want a base URL error", u, err)
		}
	}
}

// TestAnswerThatIsNotAProblem: an error answer from something in front of
// the API (a proxy's plain text) still comes back as a *Problem.
func TestAnswerThatIsNotAProblem(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer k" {
			t.Errorf("Authorization %q", got)
		}
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL+"/", client.Options{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetRun(context.Background(), "r/1")
	p, ok := client.AsProblem(err)
	if !ok || p.Status != http.StatusBadGateway || p.Code != "http_502" || p.Detail != "bad gateway" {
		t.Fatalf("error %v, want a 502 problem", err)
	}
	var target *client.Problem
	if !errors.As(err, &target) || !strings.Contains(err.Error(), "502") {
		t.Fatalf("error %q", err)
	}
}

// TestPathSegmentsAreEscaped: ids and names travel as one path segment.
func TestPathSegmentsAreEscaped(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.EscapedPath()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c, err := client.New(srv.URL+"/prefix", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRun(context.Background(), "a/b c"); err != nil {
		t.Fatal(err)
	}
	if got != "/prefix/v1/runs/a%2Fb%20c" {
		t.Fatalf("path %q", got)
	}
}
