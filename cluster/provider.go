package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Provider is a protoactor ClusterProvider backed by PostgreSQL: each member
// keeps a heartbeat row (written with the database's clock, so members' clocks
// never disagree about it) and publishes as the topology every row younger than
// TTL. It needs nothing beyond the database the sessions already live in; a
// SIGKILLed member drops out within TTL plus one Beat.
//
// For a deployment with consul, etcd or Kubernetes, pass protoactor's provider
// (cluster/clusterproviders/consul, etcd, k8s) as Config.Provider instead.
type Provider struct {
	Pool   *pgxpool.Pool
	Beat   time.Duration // heartbeat and poll interval (default 200 ms)
	TTL    time.Duration // a row older than this is a dead member (default 1 s)
	Logger *slog.Logger
	// OnTopology, if set, is told the number of members each time the provider
	// publishes a new topology (from its heartbeat goroutine; it must not block).
	OnTopology func(members int)

	cancel context.CancelFunc
	done   chan struct{}
	size   atomic.Int64 // members in the topology last published
	id     string
	name   string
	// known holds the Member values already handed to protoactor, by id, read
	// and written only by the heartbeat goroutine: an unchanged member is handed
	// over as the same value, never rewritten (protoactor reads its member list
	// without its lock, in MemberList.BroadcastEvent).
	known map[string]*pcluster.Member
}

const membersDDL = `CREATE TABLE IF NOT EXISTS troupe_cluster_members (
	cluster TEXT NOT NULL,
	id      TEXT NOT NULL,
	host    TEXT NOT NULL,
	port    INT  NOT NULL,
	kinds   TEXT[] NOT NULL,
	beat    TIMESTAMPTZ NOT NULL DEFAULT now(),
	PRIMARY KEY (cluster, id))`

// StartMember registers the member and starts its heartbeat loop.
func (p *Provider) StartMember(c *pcluster.Cluster) error {
	if p.Beat <= 0 {
		p.Beat = 200 * time.Millisecond
	}
	if p.TTL <= 0 {
		p.TTL = time.Second
	}
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return err
	}
	p.id, p.name = c.ActorSystem.ID, c.Config.Name
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := p.Pool.Exec(ctx, `SELECT pg_advisory_lock(7019001)`); err != nil {
		cancel()
		return err
	}
	_, err = p.Pool.Exec(ctx, membersDDL)
	_, _ = p.Pool.Exec(ctx, `SELECT pg_advisory_unlock(7019001)`)
	if err != nil {
		cancel()
		return err
	}
	if _, err := p.Pool.Exec(ctx, `INSERT INTO troupe_cluster_members (cluster, id, host, port, kinds)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (cluster, id) DO UPDATE SET beat = now()`,
		p.name, p.id, host, port, c.GetClusterKinds()); err != nil {
		cancel()
		return err
	}
	p.cancel, p.done = cancel, make(chan struct{})
	go p.loop(ctx, c)
	return nil
}

// Size is the number of members in the topology this provider last published.
func (p *Provider) Size() int { return int(p.size.Load()) }

// StartClient is not supported: every troupe node is a member.
func (p *Provider) StartClient(c *pcluster.Cluster) error { return p.StartMember(c) }

// Shutdown stops the heartbeat and deletes the member's row.
func (p *Provider) Shutdown(bool) error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	<-p.done
	p.cancel = nil
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.Pool.Exec(ctx, `DELETE FROM troupe_cluster_members WHERE cluster = $1 AND id = $2`, p.name, p.id)
	return err
}

func (p *Provider) loop(ctx context.Context, c *pcluster.Cluster) {
	defer close(p.done)
	t := time.NewTicker(p.Beat)
	defer t.Stop()
	var last string
	for {
		if members, err := p.tick(ctx); err == nil {
			if key := memberKey(members); key != last {
				last = key
				c.MemberList.UpdateClusterTopology(members)
				p.size.Store(int64(len(members)))
				if p.OnTopology != nil {
					p.OnTopology(len(members))
				}
			}
		} else if ctx.Err() == nil && p.Logger != nil {
			p.Logger.Warn("cluster: heartbeat failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Provider) tick(ctx context.Context) (pcluster.Members, error) {
	if _, err := p.Pool.Exec(ctx, `UPDATE troupe_cluster_members SET beat = now() WHERE cluster = $1 AND id = $2`,
		p.name, p.id); err != nil {
		return nil, err
	}
	rows, err := p.Pool.Query(ctx, `SELECT id, host, port, kinds FROM troupe_cluster_members
		WHERE cluster = $1 AND beat > now() - make_interval(secs => $2) ORDER BY id`, p.name, p.TTL.Seconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out pcluster.Members
	seen := map[string]*pcluster.Member{}
	for rows.Next() {
		m := &pcluster.Member{}
		var port int32
		if err := rows.Scan(&m.Id, &m.Host, &port, &m.Kinds); err != nil {
			return nil, err
		}
		m.Port = port
		if k := p.known[m.Id]; k != nil && k.Host == m.Host && k.Port == m.Port && slices.Equal(k.Kinds, m.Kinds) {
			m = k
		}
		seen[m.Id] = m
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	p.known = seen
	return out, nil
}

func memberKey(ms pcluster.Members) string {
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		ids = append(ids, m.Id)
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}
