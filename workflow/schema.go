package workflow

import (
	"strconv"
	"strings"
)

// schemaKeys are the six structural keywords, in the order their violations are
// reported.
var schemaKeys = []string{"properties", "required", "additionalProperties", "items", "enum", "const"}

var schemaAllowed = map[string]bool{
	"type": true, "oneOf": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "description": true, "title": true, "default": true, "examples": true,
}

var schemaTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true, "integer": true, "boolean": true, "null": true}

// checkSchema returns the violations of the schema subset (WORKFLOW.md 2.11) in
// walk order; none means the schema is accepted.
func checkSchema(root *jv) []string {
	var out []string
	walkSchema("schema", root, &out)
	if len(out) == 0 {
		if t := root.get("type"); !t.isString() || t.str != "object" {
			out = append(out, `schema.type must be "object" (structured output is object-rooted)`)
		}
	}
	return out
}

func walkSchema(p string, n *jv, out *[]string) {
	add := func(s string) { *out = append(*out, s) }
	if n == nil || n.kind != jObject {
		add(p + " must be a schema object")
		return
	}
	for _, k := range n.keys {
		if !schemaAllowed[k] {
			add(p + "." + k + " is not a supported keyword (subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)")
		}
	}
	for _, k := range []string{"description", "title"} {
		if a := n.get(k); a != nil && !a.isString() {
			add(p + "." + k + " must be a string")
		}
	}
	typ, oneOf := n.get("type"), n.get("oneOf")
	if typ != nil && oneOf != nil {
		add(p + " cannot declare both type and oneOf")
		return
	}
	if typ == nil && oneOf == nil {
		for _, k := range schemaKeys {
			if n.has(k) {
				add(p + "." + k + " requires type or oneOf")
			}
		}
		return
	}
	if oneOf != nil {
		if oneOf.kind != jArray || len(oneOf.items) < 2 {
			add(p + ".oneOf must be an array of at least two schemas")
		} else {
			for i, b := range oneOf.items {
				walkSchema(p+".oneOf["+strconv.Itoa(i)+"]", b, out)
			}
		}
		for _, k := range schemaKeys {
			if n.has(k) {
				add(p + "." + k + " is not supported beside oneOf")
			}
		}
		return
	}
	if typ.kind == jArray {
		add(p + ".type must be a single type string (type arrays are not supported)")
		return
	}
	if !typ.isString() || !schemaTypes[typ.str] {
		add(p + ".type must be one of object/array/string/number/integer/boolean/null")
		return
	}
	t := typ.str
	scalar := t != "object" && t != "array"
	applies := map[string]bool{
		"properties": t == "object", "required": t == "object", "additionalProperties": t == "object",
		"items": t == "array", "enum": scalar, "const": scalar,
	}
	for _, k := range schemaKeys {
		if n.has(k) && !applies[k] {
			add(p + "." + k + " is not supported on type \"" + t + "\"")
		}
	}
	switch {
	case t == "object":
		props := n.get("properties")
		if props != nil {
			if props.kind != jObject {
				add(p + ".properties must be an object of schemas")
			} else {
				for i, k := range props.keys {
					walkSchema(p+".properties."+k, props.vals[i], out)
				}
			}
		}
		if req := n.get("required"); req != nil {
			ok := req.kind == jArray
			for _, it := range req.items {
				ok = ok && it.isString()
			}
			if !ok {
				add(p + ".required must be an array of strings")
			} else {
				for _, it := range req.items {
					if props == nil || props.kind != jObject || !props.has(it.str) {
						add(p + ".required names \"" + it.str + "\" which is not in properties")
					}
				}
			}
		}
		if ap := n.get("additionalProperties"); ap != nil && ap.kind != jBool {
			add(p + ".additionalProperties must be a boolean")
		}
	case t == "array":
		if it := n.get("items"); it != nil {
			walkSchema(p+".items", it, out)
		}
	default:
		enum, cnst := n.get("enum"), n.get("const")
		enumOK, constOK := false, false
		if enum != nil {
			enumOK = enum.kind == jArray && len(enum.items) > 0
			for _, it := range enum.items {
				enumOK = enumOK && scalarOf(t, it)
			}
			if !enumOK {
				add(p + ".enum must be a non-empty array of " + t + " values")
			}
		}
		if cnst != nil {
			constOK = scalarOf(t, cnst)
			if !constOK {
				add(p + ".const must be a " + t + " value")
			}
		}
		if enumOK && constOK {
			found := false
			for _, it := range enum.items {
				found = found || it.equal(cnst)
			}
			if !found {
				add(p + ".const must be one of " + p + ".enum when both are declared")
			}
		}
	}
}

// scalarOf reports whether v is a value of the scalar schema type t.
func scalarOf(t string, v *jv) bool {
	switch t {
	case "integer":
		return v.isInteger()
	case "number":
		return v.kind == jNumber
	}
	return v.typeName() == t
}

func joinViolations(v []string) string { return strings.Join(v, "; ") }
