package seed

// UseLoadData chooses the writer of the following batches: LOAD DATA
// LOCAL INFILE (on) or multi-row INSERTs (off).
func UseLoadData(on bool) { loadData.Store(on) }
