package persistence

// SealedColumn is a column whose values the engine's payload codec
// encodes: what re-encoding them under a new key (engine.RotateCodec)
// walks.
type SealedColumn struct {
	// Name is "table.column", how reports and errors name it.
	Name string
	// Kind is the codec kind its values are encoded as: "input",
	// "output" or "error" (codec.Kind's values).
	Kind string
}

// SealedListParams pages one sealed column.
type SealedListParams struct {
	// Column is a SealedColumn's Name.
	Column string
	// Cursor continues a listing: the NextCursor of the page before.
	// Empty for the first page.
	Cursor string
	// Limit is the most values on a page: 500 when zero or negative, at
	// most 5000.
	Limit int
}

// SealedValue is one stored value of a sealed column.
type SealedValue struct {
	// Key names its row: the primary key's values, as text (a run id; a
	// run id and a step; an attempt id).
	Key []string
	// Value is the value as stored (encoded).
	Value []byte
}

// SealedPage is one page of SealedList.
type SealedPage struct {
	Values []SealedValue
	// NextCursor is the next page's SealedListParams.Cursor; empty on the
	// last page.
	NextCursor string
}

// SealedWrite replaces one sealed value.
type SealedWrite struct {
	// Key is the SealedValue's Key.
	Key []string
	// Old is the value read; the row is written only if it still holds
	// it.
	Old []byte
	// New is the value to store.
	New []byte
}

// SealedUpdateParams writes new values of one sealed column.
type SealedUpdateParams struct {
	// Column is a SealedColumn's Name.
	Column string
	Writes []SealedWrite
}

// CodecProbeParams reads, or creates, the codec probe.
type CodecProbeParams struct {
	// Create is stored as the probe when there is none yet; nil only
	// reads.
	Create []byte
}
