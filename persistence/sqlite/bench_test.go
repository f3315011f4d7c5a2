package sqlite_test

import (
	"testing"

	"github.com/dagflow/dagflow/persistence/storetest"
)

// go test -run '^$' -bench . ./persistence/sqlite
func BenchmarkClaimComplete(b *testing.B) {
	b.Run("serial", func(b *testing.B) { storetest.BenchmarkClaimComplete(b, openStore(b), 0) })
	b.Run("parallel", func(b *testing.B) { storetest.BenchmarkClaimComplete(b, openStore(b), 8) })
}

func BenchmarkClaimCompleteBatch(b *testing.B) {
	b.Run("batch64", func(b *testing.B) { storetest.BenchmarkClaimCompleteBatch(b, openStore(b), 64) })
}

func BenchmarkOrderRuns(b *testing.B) {
	b.Run("batch50", func(b *testing.B) { storetest.BenchmarkOrderRuns(b, openStore(b), 50) })
}
