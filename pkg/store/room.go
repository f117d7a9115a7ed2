package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// How full a bucket (of its MaxBytes) may be for a write to go ahead. A bucket refuses
// every message, a delete's too, once it is at MaxBytes (JetStream's discard-new limit);
// refusing new keys first, and updates a little later, keeps room for the updates and
// deletes that free it: an update of an object being deleted (its deletion timestamp set,
// a finalizer removed) and a delete are never refused before JetStream does, so a tenant
// that fills the bucket cannot stop anyone from deleting.
const (
	CreateLimit = 0.80
	UpdateLimit = 0.95
)

// roomFresh is how long a bucket's size is trusted by an update; below roomWatch of
// MaxBytes an update reads it again only that often, above it at every write. A create
// always reads it (a limit an operator lowered counts at once).
const (
	roomFresh = time.Second
	roomWatch = 0.70
)

// msgOverhead is what a stored message takes beside its value (subject, headers,
// sequence, checksum), counted until the bucket's size is read again.
const msgOverhead = 64

// room tracks how full one bucket is.
type room struct {
	kv jetstream.KeyValue

	mu         sync.Mutex
	read       time.Time
	bytes, max uint64
}

// check refuses with ErrFull a write of size bytes that would take the bucket past limit
// of its MaxBytes. A bucket without MaxBytes, or whose size cannot be read, is JetStream's
// to refuse.
func (r *room) check(ctx context.Context, limit float64, size int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit == CreateLimit || time.Since(r.read) > roomFresh || float64(r.bytes) > roomWatch*float64(r.max) {
		st, err := r.kv.Status(ctx)
		if err != nil {
			return nil
		}
		bs, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			return nil
		}
		r.read, r.bytes = time.Now(), bs.Bytes()
		r.max = 0
		if m := bs.StreamInfo().Config.MaxBytes; m > 0 {
			r.max = uint64(m)
		}
	}
	if r.max == 0 || float64(r.bytes+uint64(size)) <= limit*float64(r.max) {
		r.bytes += uint64(size) + msgOverhead // until the next read, count the write
		return nil
	}
	return fmt.Errorf("%w: bucket %s holds %d of the %d bytes it may (writes stop at %.0f%%; reads and deletes go on)",
		ErrFull, r.kv.Bucket(), r.bytes, r.max, limit*100)
}

// full marks JetStream refusing a message for a limit of its stream (MaxBytes, messages per
// subject) as ErrFull.
func full(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jsStoreFailed &&
		strings.Contains(apiErr.Description, "maximum") {
		return fmt.Errorf("%w: %v", ErrFull, err)
	}
	return err
}

// jsStoreFailed is JetStream's error code for a message its store refused
// (JSStreamStoreFailedF), "maximum bytes exceeded" among them.
const jsStoreFailed jetstream.ErrorCode = 10077
