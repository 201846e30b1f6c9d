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
func JobStrategy() actor.SupervisorStrategy { return Restarting(JobDecider, Intensity{}, nil) }

// RegistryStrategy is the guardian strategy of the top-level registry actor: the
// root's restart-intensity strategy with the registry's decider.
func RegistryStrategy() actor.SupervisorStrategy { return Guardian(RegistryDecider) }

// Guardian is the strategy troupe puts at the system root, as the guardian of each
// top-level actor (the registry, the owners, the directory): [Restarting] with the
// default [Intensity] and the kind's decider. A decider that answers Restart gets
// at most DefaultMaxRestarts restarts within DefaultWithin; past that the top-level
// actor stops (a guardian has no supervisor to escalate to).
func Guardian(decider actor.DeciderFunc) actor.SupervisorStrategy {
	return Restarting(decider, Intensity{}, nil)
}

// OwnerDecider decides for a failed owner actor: stop. Its Stopping handler tells
// the registry, which tears the incarnation's jobs down like a dispose; a restarted
// owner would be a new incarnation under an old identity.
func OwnerDecider(reason any) actor.Directive { return actor.StopDirective }

// OwnerStrategy is the guardian strategy of owner actors.
func OwnerStrategy() actor.SupervisorStrategy { return Guardian(OwnerDecider) }

// DirectoryDecider decides for a failed directory actor: resume. A restart would
// stop every Activation (its children); its state changes are applied whole.
func DirectoryDecider(reason any) actor.Directive { return actor.ResumeDirective }

// DirectoryStrategy is the guardian strategy of the continuation directory.
func DirectoryStrategy() actor.SupervisorStrategy { return Guardian(DirectoryDecider) }
