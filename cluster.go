package troupe

import (
	"context"
	"time"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/messages"
)

// JoinCluster makes this System a member of a troupe cluster (package cluster,
// README "Cluster"): call it before StartContinuations, which then places every
// continuable child through the cluster. The embedder's code is otherwise the
// same for one process or many: a parent agent starts, follows up and
// interrupts its children through the same Manager and tools; each child's
// Activation, owner agent, jobs and turns run on the member that owns its id,
// with that member's runner and providers (every member registers the same
// provider names); its settlement notices and reports reach the parent agent's
// surface here. cfg.Local is set by this call (cfg.Runner is not used). The
// member leaves the cluster when the System shuts down, after the manager's drain.
func (s *System) JoinCluster(cfg cluster.Config) (*cluster.Node, error) {
	if s.member != nil {
		return nil, messages.Errorf(cluster.CodeConfig, "troupe: this System already joined a cluster")
	}
	cfg.Local = &cluster.Local{
		NewProxy: func(session string, surface owner.Surface) (*owner.Agent, error) {
			a, err := s.NewAgent(nil, session, owner.Options{Surface: surface})
			if err != nil {
				return nil, err
			}
			if err := s.jobs.RegisterAgent(context.Background(), a); err != nil {
				_ = a.Dispose(context.Background())
				return nil, err
			}
			return a, nil
		},
		Deliver: func(parent, child string, msg owner.Message, relay, quiet bool) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			pid := s.jobs.RegisteredAgent(ctx, parent)
			if pid == nil {
				return messages.Errorf(cluster.CodeNotFound, "no live agent %q on this member", parent)
			}
			if relay {
				s.actors.Root.Send(pid, &deliver.Relay{Message: msg, Quiet: quiet})
				return nil
			}
			s.actors.Root.Send(pid, &deliver.ChildNotice{ChildID: child, Message: msg})
			return nil
		},
	}
	n, err := cluster.Start(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := s.root.Add("cluster.leave()", func(context.Context) error { n.Shutdown(); return nil }); err != nil {
		n.Shutdown()
		return nil, err
	}
	s.member = n
	return n, nil
}
