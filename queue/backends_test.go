package queue

import (
	"testing"
)

func TestRedis(t *testing.T) { runSuite(t, newRealRedis) }

func TestMiniredis(t *testing.T) { runSuite(t, newMiniredis) }
