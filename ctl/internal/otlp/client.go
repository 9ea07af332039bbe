package otlp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Client posts requests to one endpoint.
type Client struct {
	cfg  Config
	http *http.Client
}

// RequestTimeout bounds one post: a Collector slower than that is
// treated as down, and the request is tried again later.
const RequestTimeout = 15 * time.Second

// NewClient posts to cfg.Endpoint.
func NewClient(cfg Config) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS
	}
	return &Client{cfg: cfg, http: &http.Client{Transport: tr, Timeout: RequestTimeout}}
}

// RetryError is a failure worth retrying (the Collector down, slow, or
// answering 429, 502, 503 or 504); After is its Retry-After, 0 if none.
type RetryError struct {
	Err   error
	After time.Duration
}

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

// Send posts one request (protobuf, gzip'd: an
// ExportProfilesServiceRequest). A RetryError says to try again; any other
// error is the Collector refusing this request (400: a body too large, a
// message or a profiles development version it does not take; 401, 403:
// the credentials), which sending again would not change. Errors name the
// endpoint.
func (c *Client) Send(ctx context.Context, it Item) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Endpoint, bytes.NewReader(it.Body))
	if err != nil {
		return fmt.Errorf("%s: %w", c.cfg.Endpoint, err)
	}
	for k, v := range c.cfg.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &RetryError{Err: fmt.Errorf("posting to %s: %w", c.cfg.Endpoint, unwrapURL(err))}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("%s answered %s%s", c.cfg.Endpoint, resp.Status, describe(resp.StatusCode, resp.Header.Get("Content-Type"), msg, it))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return &RetryError{Err: err, After: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	return err
}

// unwrapURL drops url.Error's "Post "URL": " prefix: the errors name the
// endpoint once already.
func unwrapURL(err error) error {
	var u interface{ Unwrap() error }
	if errors.As(err, &u) && strings.HasPrefix(err.Error(), "Post ") {
		return u.Unwrap()
	}
	return err
}

// describe is what the Collector said (a google.rpc.Status in protobuf,
// or text), and what to check: for a 400, only what its message is about
// (the body's size, or the profiles development version).
func describe(code int, ctype string, body []byte, it Item) string {
	text := strings.TrimSpace(string(body))
	if strings.Contains(ctype, "protobuf") {
		text = statusMessage(body)
	}
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	out := ""
	if text != "" {
		out = ": " + text
	}
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		out += " (check the credentials: " + EnvHeaders + `="Authorization=Bearer%20TOKEN", or the client certificate)`
	case http.StatusBadRequest:
		switch {
		case strings.Contains(text, "request body too large"):
			// confighttp's http.MaxBytesReader, on the body as sent or
			// once unpacked.
			out += fmt.Sprintf(" (the request was %d bytes of protobuf, %d gzip'd: more than the receiver's max_request_body_size, which bounds both; give --otlp-max-request-bytes under it)", it.Size, len(it.Body))
		case strings.Contains(text, "development-version"), strings.Contains(text, "proto:"), strings.Contains(text, "unmarshal"):
			out += " (a Collector of another profiles development version than heapctl's, which speaks that of Collector v0.165)"
		}
	case http.StatusNotFound:
		out += " (no profiles receiver there: the path should be " + ProfilesPath + ", and the Collector needs a profiles pipeline, which needs --feature-gates=service.profilesSupport)"
	}
	return out
}

// statusMessage is the message (field 2) of a google.rpc.Status.
func statusMessage(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ""
			}
			return string(v)
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return ""
		}
		b = b[n:]
	}
	return ""
}

// MaxRetryAfter caps what a Retry-After may ask, so that a wrong header
// cannot stop the push for a day.
const MaxRetryAfter = 5 * time.Minute

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}
