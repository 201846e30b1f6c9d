//go:build !troupe_mutation

package job

import "github.com/asynkron/protoactor-go/actor"

// The no-op twins of planted.go's hooks: outside troupe_mutation builds there are
// no planted bugs, and each hook inlines to nothing (test/mutation's build check
// finds no "planted" symbol in a default binary).

func plantedReceive(*jobActor) func() { return nil }

func plantedStopped(*jobActor) {}

func plantedStart(*jobActor, *actor.RootContext, *actor.PID) {}

func plantedDeliver(*jobActor, Outcome, bool) bool { return false }

func plantedDelivery(*jobActor) bool { return false }
