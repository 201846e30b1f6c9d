package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// jv is a parsed JSON value that keeps object key order (JavaScript's Object.keys
// order for the texts this package parses: the engine's own materializations, and
// request metas, whose integer-like keys the validator never treats specially).
type jv struct {
	kind  jkind
	str   string      // string
	num   json.Number // number
	b     bool        // bool
	items []*jv       // array
	keys  []string    // object, in order
	vals  []*jv       // object, parallel to keys
}

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// parseJV parses one JSON text; a duplicate key keeps its first position and the
// last value, as JSON.parse does.
func parseJV(data []byte) (*jv, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJV(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

func decodeJV(dec *json.Decoder) (*jv, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jv{kind: jNull}, nil
	case bool:
		return &jv{kind: jBool, b: t}, nil
	case json.Number:
		return &jv{kind: jNumber, num: t}, nil
	case string:
		return &jv{kind: jString, str: t}, nil
	case json.Delim:
		if t == '[' {
			v := &jv{kind: jArray}
			for dec.More() {
				it, err := decodeJV(dec)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, it)
			}
			_, err := dec.Token()
			return v, err
		}
		v := &jv{kind: jObject}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			val, err := decodeJV(dec)
			if err != nil {
				return nil, err
			}
			if i := v.index(k); i >= 0 {
				v.vals[i] = val
				continue
			}
			v.keys = append(v.keys, k)
			v.vals = append(v.vals, val)
		}
		_, err := dec.Token()
		return v, err
	}
	return nil, errors.New("unexpected JSON token")
}

func (v *jv) index(k string) int {
	for i, kk := range v.keys {
		if kk == k {
			return i
		}
	}
	return -1
}

// get returns the member k of an object, or nil.
func (v *jv) get(k string) *jv {
	if v == nil || v.kind != jObject {
		return nil
	}
	if i := v.index(k); i >= 0 {
		return v.vals[i]
	}
	return nil
}

func (v *jv) has(k string) bool { return v.get(k) != nil }

// isString reports whether v is a JSON string.
func (v *jv) isString() bool { return v != nil && v.kind == jString }

// typeName is the JSON Schema type name of v ("integer" is reported as "number").
func (v *jv) typeName() string {
	switch v.kind {
	case jNull:
		return "null"
	case jBool:
		return "boolean"
	case jNumber:
		return "number"
	case jString:
		return "string"
	case jArray:
		return "array"
	}
	return "object"
}

// isInteger reports whether v is a number with an integer value.
func (v *jv) isInteger() bool {
	if v.kind != jNumber {
		return false
	}
	f, err := v.num.Float64()
	return err == nil && f == float64(int64(f))
}

// equal is JSON deep equality (numbers by value).
func (v *jv) equal(w *jv) bool {
	if v.kind != w.kind {
		return false
	}
	switch v.kind {
	case jNull:
		return true
	case jBool:
		return v.b == w.b
	case jNumber:
		a, _ := v.num.Float64()
		b, _ := w.num.Float64()
		return a == b
	case jString:
		return v.str == w.str
	case jArray:
		if len(v.items) != len(w.items) {
			return false
		}
		for i := range v.items {
			if !v.items[i].equal(w.items[i]) {
				return false
			}
		}
		return true
	}
	if len(v.keys) != len(w.keys) {
		return false
	}
	for i, k := range v.keys {
		o := w.get(k)
		if o == nil || !v.vals[i].equal(o) {
			return false
		}
	}
	return true
}
