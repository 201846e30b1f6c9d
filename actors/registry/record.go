package registry

// recordFlags packs a record's booleans into one byte: beside the 4-byte status
// they fill one word, where five bools took two and carried the record from the
// 144 B size class into the 160 B one (152 B; TestRecordFitsItsSizeClass).
type recordFlags uint8

const (
	flagReported   recordFlags = 1 << iota // the delivery claim: the model has seen the terminal state (SPEC)
	flagSlot                               // holds an admission slot
	flagHasDetail                          // detail is present
	flagStream                             // the producer has ReadOutput
	flagReadInline                         // readOutput never blocks: liveFinalOutput, or declared job.Hooks.ReadNonBlocking
)

func (f recordFlags) has(b recordFlags) bool { return f&b != 0 }

func (f *recordFlags) set(b recordFlags, on bool) {
	if on {
		*f |= b
	} else {
		*f &^= b
	}
}

func (r *record) reported() bool   { return r.flags.has(flagReported) }
func (r *record) slot() bool       { return r.flags.has(flagSlot) }
func (r *record) hasDetail() bool  { return r.flags.has(flagHasDetail) }
func (r *record) stream() bool     { return r.flags.has(flagStream) }
func (r *record) readInline() bool { return r.flags.has(flagReadInline) }

func (r *record) setReported(on bool)  { r.flags.set(flagReported, on) }
func (r *record) setSlot(on bool)      { r.flags.set(flagSlot, on) }
func (r *record) setHasDetail(on bool) { r.flags.set(flagHasDetail, on) }
