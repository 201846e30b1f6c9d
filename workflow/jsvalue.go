package workflow

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf16"

	"github.com/dop251/goja"
)

// materializer copies a value leaving the script into plain JSON data
// (WORKFLOW.md 2.10). It runs inside a native call, so getters and proxy traps run as ordinary
// JavaScript and their throws surface as the call's error.
type materializer struct {
	vm        *goja.Runtime
	path      string // the failing path
	reason    string // the failing reason; "" while none
	ancestors []*goja.Object
}

var bigIntType = reflect.TypeOf((*big.Int)(nil))

func (m *materializer) fail(path, reason string) goja.Value {
	if m.reason == "" {
		m.path, m.reason = path, reason
	}
	return nil
}

// walk returns the copy of v, or nil after recording the failure.
func (m *materializer) walk(v goja.Value, path string) goja.Value {
	if v == nil || goja.IsUndefined(v) {
		return m.fail(path, "undefined is not JSON data")
	}
	if goja.IsNull(v) {
		return goja.Null()
	}
	switch x := v.(type) {
	case *goja.Symbol:
		return m.fail(path, "symbols are not plain JSON data")
	case *goja.Object:
		return m.walkObject(x, path)
	}
	switch v.ExportType() {
	case bigIntType:
		return m.fail(path, "bigints are not JSON data")
	case reflect.TypeOf(int64(0)), reflect.TypeOf(float64(0)):
		if f := v.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			return m.fail(path, "non-finite numbers are not JSON data")
		}
	}
	return v
}

func (m *materializer) walkObject(o *goja.Object, path string) goja.Value {
	if _, ok := goja.AssertFunction(o); ok {
		return m.fail(path, "functions are not plain JSON data")
	}
	if slices.Contains(m.ancestors, o) {
		return m.fail(path, "circular references are not JSON data")
	}
	m.ancestors = append(m.ancestors, o)
	defer func() { m.ancestors = m.ancestors[:len(m.ancestors)-1] }()
	if len(o.Symbols()) > 0 {
		return m.fail(path, "symbol-keyed properties are not plain JSON data")
	}
	if o.ClassName() == "Array" {
		n := o.Get("length").ToInteger()
		keys := o.Keys()
		present := make(map[string]bool, len(keys))
		var extra []string
		for _, k := range keys {
			if i, err := strconv.ParseInt(k, 10, 64); err == nil && i >= 0 && i < n && strconv.FormatInt(i, 10) == k {
				present[k] = true
			} else {
				extra = append(extra, k)
			}
		}
		out := m.vm.NewArray()
		for i := int64(0); i < n; i++ {
			k := strconv.FormatInt(i, 10)
			if !present[k] {
				return m.fail(path+"["+k+"]", "sparse arrays are not JSON data")
			}
			c := m.walk(o.Get(k), path+"["+k+"]")
			if c == nil {
				return nil
			}
			_ = out.Set(k, c)
		}
		if len(extra) > 0 {
			return m.fail(path+"."+extra[0], "arrays with non-index properties are not JSON data")
		}
		return out
	}
	if p := o.Prototype(); p != nil && p.Prototype() != nil {
		return m.fail(path, "only plain objects and arrays are JSON data (exotic prototype)")
	}
	out := m.vm.NewObject()
	_ = out.SetPrototype(nil)
	for _, k := range o.Keys() {
		c := m.walk(o.Get(k), path+"."+k)
		if c == nil {
			return nil
		}
		_ = out.DefineDataProperty(k, c, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
	}
	return out
}

// jsonText re-encodes a parsed value compactly, keeping key order and without
// HTML escaping (as JSON.stringify writes it).
func (v *jv) jsonText() []byte {
	var b bytes.Buffer
	v.write(&b)
	return b.Bytes()
}

func (v *jv) write(b *bytes.Buffer) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jNumber:
		b.WriteString(v.num.String())
	case jString:
		writeJSONString(b, v.str)
	case jArray:
		b.WriteByte('[')
		for i, it := range v.items {
			if i > 0 {
				b.WriteByte(',')
			}
			it.write(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			v.vals[i].write(b)
		}
		b.WriteByte('}')
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}

// defaultLabel is a call's label without opts.label: the prompt's first line when
// it has at most 48 UTF-16 units, else its first 47 units (46 if the 47th would
// split a surrogate pair) and "…".
func defaultLabel(prompt string) string {
	line := prompt
	if i := bytes.IndexByte([]byte(prompt), '\n'); i >= 0 {
		line = prompt[:i]
	}
	u := utf16.Encode([]rune(line))
	if len(u) <= 48 {
		return line
	}
	n := 47
	if utf16.IsSurrogate(rune(u[46])) && u[46] < 0xDC00 {
		n = 46
	}
	return string(utf16.Decode(u[:n])) + "…"
}
