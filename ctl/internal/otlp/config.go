package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// ProfilesPath is where an OTLP/HTTP receiver takes profiles while the
// signal is in development.
const ProfilesPath = "/v1development/profiles"

// The OpenTelemetry exporters' standard variables.
const (
	EnvEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"          // base URL: ProfilesPath is added
	EnvProfilesEndpoint = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT" // the URL itself
	EnvHeaders          = "OTEL_EXPORTER_OTLP_HEADERS"           // k=v,k2=v2, values URL-encoded
)

// Config is what the push needs, as the flags and the environment say it.
type Config struct {
	Endpoint string // the URL posted to, ProfilesPath included
	From     string // where Endpoint came from, for errors: "--otlp-endpoint", or a variable
	Header   http.Header
	TLS      *tls.Config // nil: the system's roots, no client certificate
	Interval time.Duration
	// QueueBytes bounds the requests held while the Collector does not
	// take them (gzip'd); the oldest go first.
	QueueBytes int
	// MaxRequestBytes bounds one request's protobuf, before gzip: a push
	// is split into requests of at most that (split.go).
	MaxRequestBytes int
}

// Settings are the raw flag values.
type Settings struct {
	Endpoint              string // --otlp-endpoint
	CAFile, CertFile, Key string
	Interval              time.Duration
	QueueBytes            int
	MaxRequestBytes       int // --otlp-max-request-bytes; 0: DefaultMaxRequestBytes
}

// Resolve checks the settings and the environment (getenv: os.Getenv)
// and returns the configuration, or ok false when no endpoint is given
// anywhere: no push. Every mistake is an error now, before anything
// starts: a URL that is not http(s)://host, a header that is not k=v, a
// certificate that cannot be read.
func Resolve(s Settings, getenv func(string) string) (c Config, ok bool, err error) {
	c = Config{Interval: s.Interval, QueueBytes: s.QueueBytes, MaxRequestBytes: s.MaxRequestBytes, Header: http.Header{}}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	raw, base := s.Endpoint, true
	c.From = "--otlp-endpoint"
	if raw == "" {
		if v := getenv(EnvProfilesEndpoint); v != "" {
			raw, base, c.From = v, false, EnvProfilesEndpoint
		} else if v := getenv(EnvEndpoint); v != "" {
			raw, c.From = v, EnvEndpoint
		}
	}
	if raw == "" {
		if s.CAFile != "" || s.CertFile != "" || s.Key != "" {
			return c, false, errors.New("--otlp-ca-file, --otlp-cert and --otlp-key need an endpoint (--otlp-endpoint or " + EnvEndpoint + ")")
		}
		return c, false, nil
	}
	if s.QueueBytes < 0 {
		return c, false, fmt.Errorf("--otlp-queue-bytes %d: must not be negative", s.QueueBytes)
	}
	if c.MaxRequestBytes < MinRequestBytes {
		return c, false, fmt.Errorf("--otlp-max-request-bytes %d: must be at least %d", s.MaxRequestBytes, MinRequestBytes)
	}
	if s.Interval <= 0 {
		return c, false, fmt.Errorf("--otlp-interval %v: must be positive", s.Interval)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return c, false, fmt.Errorf("%s %q: %w", c.From, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return c, false, fmt.Errorf("%s %q: want http://host:port or https://host:port (the Collector's OTLP/HTTP receiver, port 4318 by default)", c.From, raw)
	}
	// A base URL (the flag, OTEL_EXPORTER_OTLP_ENDPOINT) gets the
	// signal's path, as the OpenTelemetry exporters add v1/traces; a path
	// other than / is the user's and is kept.
	if base && (u.Path == "" || u.Path == "/") {
		u.Path = ProfilesPath
	} else if base && c.From == EnvEndpoint {
		u.Path = strings.TrimSuffix(u.Path, "/") + ProfilesPath
	}
	c.Endpoint = u.String()
	if h := getenv(EnvHeaders); h != "" {
		if err := parseHeaders(h, c.Header); err != nil {
			return c, false, fmt.Errorf("%s: %w", EnvHeaders, err)
		}
	}
	if s.CAFile != "" || s.CertFile != "" || s.Key != "" {
		if u.Scheme != "https" {
			return c, false, fmt.Errorf("--otlp-ca-file, --otlp-cert and --otlp-key are for https, and %s is %s", c.From, c.Endpoint)
		}
		if c.TLS, err = tlsConfig(s); err != nil {
			return c, false, err
		}
	}
	return c, true, nil
}

// parseHeaders reads the W3C-baggage-like list the OpenTelemetry
// exporters take: key=value pairs split by commas, values URL-encoded.
func parseHeaders(v string, h http.Header) error {
	for _, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q: want key=value", kv)
		}
		dec, err := url.QueryUnescape(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		h.Add(k, dec)
	}
	return nil
}

func tlsConfig(s Settings) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--otlp-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--otlp-ca-file %s: no PEM certificate in it", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (s.CertFile == "") != (s.Key == "") {
		return nil, errors.New("--otlp-cert and --otlp-key go together: give both or neither")
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.Key)
		if err != nil {
			return nil, fmt.Errorf("--otlp-cert %s, --otlp-key %s: %w", s.CertFile, s.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
