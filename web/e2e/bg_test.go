package e2e

import "context"

// bg is the context of calls that the test bounds otherwise.
var bg = context.Background()
