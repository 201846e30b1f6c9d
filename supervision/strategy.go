package supervision

import "github.com/asynkron/protoactor-go/actor"

// JobDecider decides for a failed job actor: always stop. A restart would lose its
// waiters and re-run nothing useful; stopping settles the job failed.
func JobDecider(reason any) actor.Directive { return actor.StopDirective }

// RegistryDecider decides for a failed registry actor: resume. A restart would stop
// every live job actor (protoactor stops children before restarting a parent), and
// the registry's cores never leave a transition half-applied.
func RegistryDecider(reason any) actor.Directive { return actor.ResumeDirective }

// JobStrategy supervises job actors (the registry's children).
func JobStrategy() actor.SupervisorStrategy { return actor.NewOneForOneStrategy(0, 0, JobDecider) }

// RegistryStrategy is the guardian strategy of the top-level registry actor.
func RegistryStrategy() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(0, 0, RegistryDecider)
}

// OwnerDecider decides for a failed owner actor: stop. Its Stopping handler tells
// the registry, which tears the incarnation's jobs down like a dispose; a restarted
// owner would be a new incarnation under an old identity.
func OwnerDecider(reason any) actor.Directive { return actor.StopDirective }

// OwnerStrategy is the guardian strategy of owner actors.
func OwnerStrategy() actor.SupervisorStrategy { return actor.NewOneForOneStrategy(0, 0, OwnerDecider) }

// DirectoryDecider decides for a failed directory actor: resume. A restart would
// stop every Activation (its children); its state changes are applied whole.
func DirectoryDecider(reason any) actor.Directive { return actor.ResumeDirective }

// DirectoryStrategy is the guardian strategy of the continuation directory.
func DirectoryStrategy() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(0, 0, DirectoryDecider)
}
