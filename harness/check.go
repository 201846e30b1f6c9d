package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Check checks ops against model with porcupine. On a violation (or an inconclusive
// check) it returns a *LinearizabilityError whose history lists ops in call order,
// each described by the model's DescribeOperation, and, if $TROUPE_ARTIFACTS is set,
// writes porcupine's HTML timeline and the history as text there, named after name.
// CheckSettlement, CheckDirectory and CheckFIFO are Check with troupe's models.
func Check(name string, model porcupine.Model, ops []porcupine.Operation) error {
	res, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	if res == porcupine.Ok {
		return nil
	}
	e := &LinearizabilityError{Result: res, History: describeOps(model, ops)}
	if dir := os.Getenv(ArtifactsEnv); dir != "" {
		base := filepath.Join(dir, artifactName(name))
		err := errors.Join(os.MkdirAll(dir, 0o755),
			porcupine.VisualizePath(model, info, base+".html"),
			os.WriteFile(base+".txt", []byte(e.History), 0o644))
		if err != nil {
			e.History += fmt.Sprintf("(writing artifacts: %v)\n", err)
		} else {
			e.Artifact = base + ".html"
		}
	}
	return e
}

// describeOps renders ops in call order, one per line.
func describeOps(model porcupine.Model, ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var b strings.Builder
	for _, op := range sorted {
		text := fmt.Sprint(op.Input)
		if model.DescribeOperation != nil {
			text = model.DescribeOperation(op.Input, op.Output)
		}
		fmt.Fprintf(&b, "  [%3d,%3d] c%d %s\n", op.Call, op.Return, op.ClientId, text)
	}
	return b.String()
}
