package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/report"
)

// Reader is what a push reads: Source, or a fake in tests.
type Reader interface {
	Read(now time.Time) ([]Process, error)
}

// Pusher reads every Interval and sends what it read, through a Queue,
// from a goroutine of its own: a Collector that is slow or down never
// holds up the reads, nor anything else export serves.
type Pusher struct {
	Config  Config
	Source  Reader
	Version string // the scope's version: heapctl's
	Log     *zap.Logger
	// Backoff between tries while the Collector does not take a request,
	// doubling from MinBackoff to MaxBackoff; a Retry-After is honoured
	// instead, up to MaxRetryAfter.
	MinBackoff, MaxBackoff time.Duration
	// FlushTimeout bounds the sending of what is held once Run's context
	// is done.
	FlushTimeout time.Duration

	queue *Queue
	zw    *gzip.Writer // reused: each one holds a few hundred KiB of tables
}

// Defaults for the zero fields.
const (
	DefaultMinBackoff   = time.Second
	DefaultMaxBackoff   = time.Minute
	DefaultFlushTimeout = 5 * time.Second
	DefaultQueueBytes   = 32 << 20
)

// Run pushes until ctx is done, then reads once more, sends what it
// holds within FlushTimeout and returns. It returns an error only for a
// push that cannot start; a Collector that refuses or is away is logged.
func (p *Pusher) Run(ctx context.Context) error {
	if p.MinBackoff <= 0 {
		p.MinBackoff = DefaultMinBackoff
	}
	if p.MaxBackoff < p.MinBackoff {
		p.MaxBackoff = max(DefaultMaxBackoff, p.MinBackoff)
	}
	if p.FlushTimeout <= 0 {
		p.FlushTimeout = DefaultFlushTimeout
	}
	if p.Config.QueueBytes <= 0 {
		p.Config.QueueBytes = DefaultQueueBytes
	}
	if p.Config.MaxRequestBytes <= 0 {
		p.Config.MaxRequestBytes = DefaultMaxRequestBytes
	}
	p.queue = NewQueue(p.Config.QueueBytes)
	if c, ok := p.Source.(interface{ Close() }); ok {
		defer c.Close()
	}
	client := NewClient(p.Config)
	sendCtx, cancelSend := context.WithCancel(context.Background())
	defer cancelSend()
	draining := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		p.send(sendCtx, client, draining)
	}()

	p.read(time.Now())
	tick := time.NewTicker(p.Config.Interval)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-tick.C:
			p.read(time.Now()) // not the tick's time: a read late on a loaded machine says when it read
		case <-ctx.Done():
			done = true
		}
	}
	// What happened since the last push goes too.
	p.read(time.Now())
	close(draining)
	select {
	case <-sent:
	case <-time.After(p.FlushTimeout):
		cancelSend()
		<-sent
	}
	if n, b := p.queue.Len(); n > 0 {
		p.Log.Warn(fmt.Sprintf("%s: %d requests (%d bytes) not sent before the exit (%v allowed)", p.Config.Endpoint, n, b, p.FlushTimeout))
	}
	return nil
}

// read takes one push's profiles into the queue.
func (p *Pusher) read(now time.Time) {
	procs, err := p.Source.Read(now)
	if err != nil {
		p.Log.Warn("reading the regions for the push", zap.Error(err))
		return
	}
	if len(procs) == 0 {
		p.Log.Debug("no region to push")
		return
	}
	reqs, cuts, err := split(procs, p.Version, p.Config.MaxRequestBytes)
	if err != nil {
		p.Log.Error("encoding the profiles", zap.Error(err))
		return
	}
	for _, c := range cuts {
		p.Log.Warn(fmt.Sprintf("process %d (%s): its profiles take %d bytes, more than a request may (--otlp-max-request-bytes %d): sent alone, with its %d heaviest stacks of %d (%.1f%% of its inuse_space)",
			c.PID, c.Name, c.Bytes, p.Config.MaxRequestBytes, c.Kept, c.Stacks, 100*c.KeptInuseFrac), zap.Int("pid", c.PID), zap.String("command", c.Name))
	}
	for _, r := range reqs {
		body, err := p.gzip(r.body)
		if err != nil {
			p.Log.Error("compressing the profiles", zap.Error(err))
			return
		}
		p.queue.Push(Item{Body: body, Size: len(r.body), Profiles: r.profiles})
		p.Log.Debug("push queued", zap.Int("processes", len(r.procs)), zap.Int("bytes", len(r.body)), zap.Int("gzip_bytes", len(body)))
	}
	p.Log.Debug("push read", zap.Int("processes", len(procs)), zap.Int("requests", len(reqs)))
}

// gzip compresses a request's body: a Collector's receiver takes
// Content-Encoding gzip, and heap profiles shrink to about a tenth.
func (p *Pusher) gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	if p.zw == nil {
		p.zw = gzip.NewWriter(&buf)
	} else {
		p.zw.Reset(&buf)
	}
	if _, err := p.zw.Write(b); err != nil {
		return nil, err
	}
	if err := p.zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// send posts the queue's requests, oldest first, until draining is
// closed and the queue is empty, or ctx is done.
func (p *Pusher) send(ctx context.Context, client *Client, draining <-chan struct{}) {
	var (
		backoff   = p.MinBackoff
		down      time.Time // when the outage began; zero while none
		delivered bool
		dropped   int
	)
	for {
		it, ok := p.queue.Peek()
		if !ok {
			select {
			case <-p.queue.Ready():
				continue
			case <-draining:
				if _, ok := p.queue.Peek(); ok {
					continue
				}
				return
			case <-ctx.Done():
				return
			}
		}
		err := client.Send(ctx, it)
		dropped += p.queue.TakeDropped()
		var retry *RetryError
		switch {
		case err == nil:
			p.queue.Done(it)
			backoff = p.MinBackoff
			if !down.IsZero() {
				// A warning, as the outage's was: the two bracket it.
				p.Log.Warn(fmt.Sprintf("%s takes profiles again after %v down: %s dropped meanwhile (queue full, oldest first)",
					p.Config.Endpoint, time.Since(down).Round(time.Second), report.Count(dropped, "request")))
				down, dropped = time.Time{}, 0
			} else if !delivered {
				p.Log.Info(fmt.Sprintf("pushing profiles to %s every %v", p.Config.Endpoint, p.Config.Interval))
			}
			delivered = true
			continue
		case errors.Is(err, context.Canceled):
			return
		case errors.As(err, &retry):
			if down.IsZero() {
				down = time.Now()
				p.Log.Warn(fmt.Sprintf("%v; retrying with backoff, holding up to %d MiB of profiles (the oldest dropped beyond)", err, p.Config.QueueBytes>>20))
			}
			wait := backoff
			if retry.After > 0 {
				wait = retry.After
			}
			backoff = min(backoff*2, p.MaxBackoff)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
		default:
			// Refused: sending it again changes nothing. Said each time,
			// since it is a setting to fix, not a passing outage.
			p.queue.Done(it)
			p.Log.Error(fmt.Sprintf("%v; %s not sent", err, report.Count(it.Profiles, "profile")))
		}
	}
}
