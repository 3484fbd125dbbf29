package huawei

import (
	"fmt"
	"sync"
)

// Drivers hands out Drivers so that every Driver of one OLT host shares
// one write lock: a call with one-off credentials, or over the other
// transport, still waits for the registered OLT's write in progress.
// The router's OLT service keeps one Drivers for its lifetime.
type Drivers struct {
	deps Deps

	mu      sync.Mutex
	locks   map[string]chan struct{} // host -> write lock
	drivers map[string]*Driver       // full configuration -> driver
}

// NewDrivers returns an empty set.
func NewDrivers(deps Deps) *Drivers {
	return &Drivers{deps: deps, locks: map[string]chan struct{}{}, drivers: map[string]*Driver{}}
}

// Get returns the Driver for cfg, reusing the one made earlier for the
// same configuration (and its idle sessions).
func (s *Drivers) Get(cfg Config) (*Driver, error) {
	key := fmt.Sprintf("%+v", cfg)
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.drivers[key]; ok {
		return d, nil
	}
	d, err := New(cfg, s.deps)
	if err != nil {
		return nil, err
	}
	lock, ok := s.locks[cfg.Host]
	if !ok {
		lock = d.writeSem
		s.locks[cfg.Host] = lock
	}
	d.writeSem = lock
	s.drivers[key] = d
	return d, nil
}

// Close closes every Driver handed out.
func (s *Drivers) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, d := range s.drivers {
		d.Close()
		delete(s.drivers, k)
	}
	return nil
}

// Forget closes and drops every Driver of host, so the next Get dials
// with the configuration as it is now (a registered OLT was changed or
// deleted). The host's write lock stays: a write in progress still holds
// it.
func (s *Drivers) Forget(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, d := range s.drivers {
		if d.cfg.Host == host {
			d.Close()
			delete(s.drivers, k)
		}
	}
}
