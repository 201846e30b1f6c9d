package job

import "sync"

// Settler is a producer's side of Hooks.OnSettle: the producer calls Settle with
// its one outcome, troupe calls OnSettle with its settle function, and whichever
// comes second delivers, on its caller's goroutine. Its zero value is ready to use
// (a producer may embed one); a Settler serves one job. It is a leaf helper: its
// lock guards only its own fields.
type Settler struct {
	mu struct {
		sync.Mutex
		settled    bool
		subscribed bool          // OnSettle has been called
		o          Outcome       // held until OnSettle, when Settle came first
		settle     func(Outcome) // troupe's, until the outcome is delivered
	}
}

// Settle settles the job with o. Only the first call counts: it returns true;
// later calls change nothing and return false. It never blocks.
func (s *Settler) Settle(o Outcome) bool {
	s.mu.Lock()
	if s.mu.settled {
		s.mu.Unlock()
		return false
	}
	s.mu.settled = true
	f := s.mu.settle
	s.mu.settle = nil
	if f == nil {
		s.mu.o = o
	}
	s.mu.Unlock()
	if f != nil {
		f(o)
	}
	return true
}

// Settled reports whether Settle has been called.
func (s *Settler) Settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.settled
}

// OnSettle is the Hooks.OnSettle of the job s serves: an outcome already settled
// is delivered now, a later one when Settle is called. A second call (a Settler
// reused for another job, a producer bug) is ignored.
func (s *Settler) OnSettle(settle func(Outcome)) {
	s.mu.Lock()
	if s.mu.subscribed {
		s.mu.Unlock()
		return
	}
	s.mu.subscribed = true
	if !s.mu.settled {
		s.mu.settle = settle
		s.mu.Unlock()
		return
	}
	o := s.mu.o
	s.mu.o = Outcome{}
	s.mu.Unlock()
	settle(o)
}
