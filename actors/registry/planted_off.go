//go:build !troupe_mutation

package registry

// The no-op twins of planted.go's hooks: outside troupe_mutation builds there are
// no planted bugs, and each hook inlines to nothing (test/mutation's build check
// finds no "planted" symbol in a default binary).

func (*registryActor) plantedReceive(any) bool { return false }

func (*registryActor) plantedReleaseOnTerminated(*record) {}

func (*registryActor) plantedAlreadyAnnounced(string) bool { return false }
