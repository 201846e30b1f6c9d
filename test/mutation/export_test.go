//go:build troupe_mutation

package mutation

// Summary is firstLine, for the tests.
var Summary = firstLine
