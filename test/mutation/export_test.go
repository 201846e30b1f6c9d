package mutation

// Summary is firstLine, for the tests.
var Summary = firstLine
