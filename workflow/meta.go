package workflow

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Meta is a run's normalized identity block (WORKFLOW.md 2.8). It is request data,
// never evaluated. Its JSON form lists name, description, whenToUse, phases in that
// order and omits absent fields; nil Phases is absent, an empty non-nil slice is [].
type Meta struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	WhenToUse   *string `json:"whenToUse,omitempty"`
	Phases      []Phase `json:"phases"`
}

// Phase is one declared progress phase (vocabulary only: phase() is not checked
// against it).
type Phase struct {
	Title    string  `json:"title"`
	Detail   *string `json:"detail,omitempty"`
	Provider *string `json:"provider,omitempty"`
	Model    *string `json:"model,omitempty"`
}

// MarshalJSON omits phases when absent and keeps [] when present and empty.
func (m Meta) MarshalJSON() ([]byte, error) {
	type plain struct {
		Name        string  `json:"name"`
		Description string  `json:"description"`
		WhenToUse   *string `json:"whenToUse,omitempty"`
	}
	type withPhases struct {
		plain
		Phases []Phase `json:"phases"`
	}
	p := plain{m.Name, m.Description, m.WhenToUse}
	if m.Phases == nil {
		return json.Marshal(p)
	}
	return json.Marshal(withPhases{p, m.Phases})
}

// clone returns a deep copy, so a listener's borrowed payload cannot alias the run's.
func (m Meta) clone() Meta {
	if m.Phases != nil {
		m.Phases = append([]Phase{}, m.Phases...)
	}
	return m
}

// validateMeta checks raw against WORKFLOW.md 2.8, collecting every violation in order, and
// returns the normalized copy or the META_INVALID error.
func validateMeta(raw json.RawMessage) (Meta, error) {
	var v *jv
	if len(raw) > 0 {
		v, _ = parseJV(raw)
	}
	if v == nil || v.kind != jObject {
		return Meta{}, metaErr([]string{"meta must be an object"})
	}
	var errs []string
	for _, k := range v.keys {
		switch k {
		case "name", "description", "whenToUse", "phases":
		default:
			errs = append(errs, "meta."+k+" is not a recognized field (name/description/whenToUse/phases)")
		}
	}
	var m Meta
	if n := v.get("name"); n.isString() && n.str != "" {
		m.Name = n.str
	} else {
		errs = append(errs, "meta.name must be a non-empty string")
	}
	if d := v.get("description"); d.isString() && d.str != "" {
		m.Description = d.str
	} else {
		errs = append(errs, "meta.description must be a non-empty string")
	}
	if w := v.get("whenToUse"); w != nil {
		if w.isString() {
			s := w.str
			m.WhenToUse = &s
		} else {
			errs = append(errs, "meta.whenToUse must be a string")
		}
	}
	if ps := v.get("phases"); ps != nil {
		if ps.kind != jArray {
			errs = append(errs, "meta.phases must be an array")
		} else {
			m.Phases = []Phase{}
			for i, p := range ps.items {
				at := "meta.phases[" + strconv.Itoa(i) + "]"
				if p.kind != jObject {
					errs = append(errs, at+" must be an object")
					continue
				}
				for _, k := range p.keys {
					switch k {
					case "title", "detail", "provider", "model":
					default:
						errs = append(errs, at+"."+k+" is not a recognized field")
					}
				}
				var ph Phase
				if t := p.get("title"); t.isString() && t.str != "" {
					ph.Title = t.str
				} else {
					errs = append(errs, at+".title must be a non-empty string")
				}
				for _, f := range []struct {
					key string
					dst **string
				}{{"detail", &ph.Detail}, {"provider", &ph.Provider}, {"model", &ph.Model}} {
					if x := p.get(f.key); x != nil {
						if x.isString() {
							s := x.str
							*f.dst = &s
						} else {
							errs = append(errs, at+"."+f.key+" must be a string")
						}
					}
				}
				m.Phases = append(m.Phases, ph)
			}
		}
	}
	if len(errs) > 0 {
		return Meta{}, metaErr(errs)
	}
	return m, nil
}

func metaErr(violations []string) error {
	return newErr(CodeMetaInvalid, "invalid meta: "+strings.Join(violations, "; "))
}
