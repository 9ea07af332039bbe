package otlp

import "sync"

// Queue holds the requests not yet sent, oldest first, within a bound of
// bytes: a push that does not fit drops the oldest. The newest request is
// always kept, whatever its size.
type Queue struct {
	mu      sync.Mutex
	max     int
	bytes   int
	items   []Item
	ready   chan struct{} // has a value when items is not empty
	dropped int           // requests dropped since the last TakeDropped
}

// Item is one request and how many profiles it holds.
type Item struct {
	Body     []byte // gzip'd: what is sent, and what the queue's bound counts
	Size     int    // the protobuf's bytes before gzip
	Profiles int
}

// NewQueue holds up to max bytes of requests.
func NewQueue(max int) *Queue { return &Queue{max: max, ready: make(chan struct{}, 1)} }

// Push adds it at the end, dropping from the front what no longer fits,
// and returns how many it dropped.
func (q *Queue) Push(it Item) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, it)
	q.bytes += len(it.Body)
	n := 0
	for q.bytes > q.max && len(q.items) > 1 {
		q.bytes -= len(q.items[0].Body)
		q.items[0] = Item{}
		q.items = q.items[1:]
		n++
	}
	q.dropped += n
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return n
}

// Ready has a value when the queue may hold something.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Peek is the oldest request; ok false when there is none.
func (q *Queue) Peek() (Item, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return Item{}, false
	}
	return q.items[0], true
}

// Done removes it, the oldest, once sent or refused; if a Push dropped it
// meanwhile, nothing.
func (q *Queue) Done(it Item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 && len(q.items[0].Body) == len(it.Body) && (len(it.Body) == 0 || &q.items[0].Body[0] == &it.Body[0]) {
		q.bytes -= len(it.Body)
		q.items[0] = Item{}
		q.items = q.items[1:]
	}
}

// Len is how many requests, and how many bytes, it holds.
func (q *Queue) Len() (n, bytes int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items), q.bytes
}

// TakeDropped returns the drops since the last call and starts again at 0.
func (q *Queue) TakeDropped() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.dropped
	q.dropped = 0
	return n
}
