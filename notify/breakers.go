package notify

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// Breakers: executors publish each handler's circuit breaker to
// wire.BreakerBucket, one entry per executor. A handler is open while
// some executor's breaker for it is open or half-open, and closed when
// none is (an executor's entry expires with it). Each node reads the
// bucket every breakerPoll and records what it sees in the database
// (store.SaveHandlerBreaker): the node whose write changes the record
// says so, once, to the rules that choose a job running on the handler.
// One notification per handler, however many jobs wait behind it.

const breakerPoll = 2 * time.Second

func (s *Service) watchBreakers(ctx context.Context) {
	t := time.NewTicker(breakerPoll)
	defer t.Stop()
	for {
		if err := s.CheckBreakers(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("read handlers' circuit breakers", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// handlerBreaker is a handler's breaker across executors.
type handlerBreaker struct {
	open  bool
	since time.Time
}

// CheckBreakers reads the handlers' breakers once and records changes.
func (s *Service) CheckBreakers(ctx context.Context) error {
	states, err := wire.BreakerStates(ctx, s.cfg.JetStream)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	if err := s.recordStates(ctx, states, now); err != nil {
		return err
	}
	s.mu.Lock()
	prune := now.Sub(s.prunedBreakers) > time.Hour
	if prune {
		s.prunedBreakers = now
	}
	s.mu.Unlock()
	if prune {
		if err := s.cfg.Store.DeleteOldBreakerHistory(ctx, now); err != nil {
			return err
		}
	}
	handlers := map[string]*handlerBreaker{}
	for _, st := range states {
		h := handlers[st.Key]
		if h == nil {
			h = &handlerBreaker{}
			handlers[st.Key] = h
		}
		if st.Breaker == wire.BreakerOpen || st.Breaker == wire.BreakerHalfOpen {
			if !h.open || st.Since.Before(h.since) {
				h.since = st.Since
			}
			h.open = true
		} else if !h.open && st.Since.After(h.since) {
			h.since = st.Since
		}
	}
	s.mu.Lock()
	// A handler seen open before and gone from the bucket (its executors
	// stopped, their entries expired) is closed.
	for key := range s.openHandlers {
		if handlers[key] == nil {
			handlers[key] = &handlerBreaker{since: s.cfg.Now()}
		}
	}
	s.mu.Unlock()
	for key, h := range handlers {
		if err := s.breakerIs(ctx, key, h); err != nil {
			return err
		}
	}
	return nil
}

// seenEvery is how often a node writes that a handler is still served.
const seenEvery = 20 * time.Second

// recordStates records every executor's view, for the handlers page and
// the reasons an execution waits: each breaker transition, and that the
// handler is served. A node writes what it has not written itself yet (a
// transition once; that a handler is served every seenEvery), so that
// polling every 2 s writes nothing while nothing changes; of several
// nodes, the store keeps one row per transition.
func (s *Service) recordStates(ctx context.Context, states []wire.BreakerState, now time.Time) error {
	key := func(st wire.BreakerState) string {
		return st.Key + "\x00" + st.ExecutorID + "\x00" + st.Breaker + "\x00" + st.Since.UTC().Format(time.RFC3339Nano)
	}
	var (
		changes []model.BreakerChange
		seen    []model.HandlerSeen
		listed  = map[string]bool{}
	)
	s.mu.Lock()
	for _, st := range states {
		if !s.recordedBreakers[key(st)] {
			changes = append(changes, model.BreakerChange{Handler: st.Key, Queue: st.Queue, ExecutorID: st.ExecutorID,
				State: st.Breaker, Since: st.Since, Reason: st.Reason})
		}
		if !listed[st.Key] && now.Sub(s.seenWritten[st.Key]) >= seenEvery {
			listed[st.Key] = true
			seen = append(seen, model.HandlerSeen{Handler: st.Key, Queue: st.Queue, LastSeen: now})
		}
	}
	s.mu.Unlock()
	if len(changes) == 0 && len(seen) == 0 {
		return nil
	}
	if err := s.cfg.Store.SaveHandlerStates(ctx, changes, seen); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	live := make(map[string]bool, len(states))
	for _, st := range states {
		live[key(st)] = true // what the bucket no longer holds is forgotten
	}
	s.recordedBreakers = live
	for _, h := range seen {
		s.seenWritten[h.Handler] = now
	}
	return nil
}

// breakerIs records handler key's breaker as h and, if this changed the
// record, writes the events of the rules that ask for it.
func (s *Service) breakerIs(ctx context.Context, key string, h *handlerBreaker) error {
	s.mu.Lock()
	saved, seen := s.savedBreakers[key]
	s.mu.Unlock()
	if seen && saved == h.open {
		return nil // as this node last recorded it: nothing to write
	}
	changed, known, err := s.cfg.Store.SaveHandlerBreaker(ctx, key, h.open, h.since)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.savedBreakers[key] = h.open
	if h.open {
		s.openHandlers[key] = true
	} else {
		delete(s.openHandlers, key)
	}
	s.mu.Unlock()
	if !changed || (!h.open && !known) {
		return nil
	}
	kind := domain.NotifyHandlerClose
	if h.open {
		kind = domain.NotifyHandlerOpen
	}
	rules, err := s.cfg.Store.ListHandlerRules(ctx, kind, key)
	if err != nil || len(rules) == 0 {
		return err
	}
	since := h.since.UTC()
	detail, _ := json.Marshal(map[string]any{"since": since})
	evs := make([]model.NotifyEvent, 0, len(rules))
	for _, r := range rules {
		evs = append(evs, model.NotifyEvent{ID: uuid.Must(uuid.NewV7()), RuleID: r.ID, Namespace: r.Namespace,
			Kind: kind, Handler: key, At: since, Detail: detail,
			DedupKey: r.ID.String() + "/" + kind + "/" + key + "/" + since.Format(time.RFC3339Nano)})
	}
	_, err = s.cfg.Store.CreateNotifyEvents(ctx, evs)
	return err
}
