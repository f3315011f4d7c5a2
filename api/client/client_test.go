package client_test

import (
	"context"
	"errors"
	"fmt"
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

// TestStatusHelpers: IsNotFound, IsConflict, IsUnauthorized and
// IsForbidden tell an answer's status through wrapping, and are false for
// other errors.
func TestStatusHelpers(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"urn:dagflow:problem:x","title":"x","status":%d,"detail":"d","code":%q}`, status, client.CodeConflict)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	helpers := map[int]func(error) bool{
		http.StatusNotFound:     client.IsNotFound,
		http.StatusConflict:     client.IsConflict,
		http.StatusUnauthorized: client.IsUnauthorized,
		http.StatusForbidden:    client.IsForbidden,
	}
	for _, st := range []int{http.StatusNotFound, http.StatusConflict, http.StatusUnauthorized, http.StatusForbidden, http.StatusInternalServerError} {
		status = st
		_, err := c.GetRun(context.Background(), "r")
		wrapped := fmt.Errorf("caller: %w", err)
		for hs, is := range helpers {
			if got := is(wrapped); got != (hs == st) {
				t.Errorf("answer %d: helper for %d = %v", st, hs, got)
			}
		}
	}
	for _, is := range helpers {
		if is(nil) || is(errors.New("dagflow api: 404 not_found")) {
			t.Fatal("a helper is true for an error that is not a *Problem")
		}
	}
}
