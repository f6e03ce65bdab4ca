package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one Cairn node over the native HTTP API. It is safe for
// concurrent use; create one per server and reuse it.
type Client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	key       string
	hc        *http.Client
	userAgent string
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient replaces the tuned default HTTP client (for instance to add
// TLS settings or a timeout). Keep CheckRedirect returning
// http.ErrUseLastResponse if Stat should recognise directories cheaply.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithUserAgent sets the User-Agent header of every request
// (default "cairn-client").
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// DefaultTransport returns the transport New uses: keep-alive connections,
// up to 64 idle ones per host (enough for Sync's parallel uploads), HTTP/2
// attempted over TLS, and bounded dial and header timeouts. Every call
// returns a new transport.
func DefaultTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// A server may take a while to fsync a large body on W replicas
		// before answering; only the wait for the first byte of the answer
		// after the body is sent is bounded.
		ResponseHeaderTimeout: 5 * time.Minute,
	}
}

// New returns a client for the node at baseURL (e.g. "http://127.0.0.1:8080")
// that sends adminKey as a Bearer token ("" sends none, enough to read public
// buckets). It does no I/O; a bad baseURL surfaces as an error of the first
// request.
func New(baseURL, adminKey string, opts ...Option) *Client {
	c := &Client{
		base:      strings.TrimRight(baseURL, "/"),
		key:       adminKey,
		userAgent: "cairn-client",
		hc: &http.Client{
			Transport: DefaultTransport(),
			// The API redirects only directories without their trailing
			// slash; Stat wants to see that answer, not follow it.
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the server address the client was created with, without a
// trailing slash.
func (c *Client) BaseURL() string { return c.base }

// escapePath escapes every segment of a "/"-separated path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// cleanPath drops leading slashes: paths are relative to the bucket.
func cleanPath(p string) string { return strings.TrimLeft(p, "/") }

// objectURL is the URL of bucket/p; dir adds a trailing slash.
func (c *Client) objectURL(bucket, p string, dir bool) string {
	u := c.base + "/" + url.PathEscape(bucket) + "/" + escapePath(cleanPath(p))
	if dir && !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u
}

// request is one HTTP exchange.
type request struct {
	method string
	url    string
	query  url.Values
	header http.Header
	body   io.Reader
	size   int64 // Content-Length; -1 unknown (chunked)
}

// do sends rq and returns the response if its status is 2xx or 3xx (the
// caller closes the body); otherwise it returns an *Error and closes the body.
func (c *Client) do(ctx context.Context, rq request) (*http.Response, error) {
	resp, err := c.send(ctx, rq)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// send sends rq and returns the response whatever its status (the caller
// closes the body).
func (c *Client) send(ctx context.Context, rq request) (*http.Response, error) {
	u := rq.url
	if len(rq.query) > 0 {
		u += "?" + rq.query.Encode()
	}
	body := rq.body
	if body != nil && rq.size == 0 {
		// A non-nil body with ContentLength 0 would be sent chunked.
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if body != nil && rq.size > 0 {
		req.ContentLength = rq.size
	}
	for k, v := range rq.header {
		req.Header[k] = v
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	req.Header.Set("User-Agent", c.userAgent)
	return c.hc.Do(req)
}

// readError builds an *Error from a failed response, reading at most 64 KiB
// of its body.
func readError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(data, &body) == nil {
		if body.Error != "" {
			e.Message = body.Error
		}
		e.Code = body.Code
	} else if s := strings.TrimSpace(string(data)); s != "" && len(s) < 200 && !strings.ContainsAny(s, "\n<") {
		e.Message = s
	}
	return e
}

// drain reads what is left of a body (so the connection can be reused) and
// closes it.
func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, 256<<10))
	_ = rc.Close()
}

// decodeJSON decodes a response body into v and closes it.
func decodeJSON(resp *http.Response, v any) error {
	defer drain(resp.Body)
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%w: decode %s answer: %w", ErrProtocol, resp.Request.Method, err)
	}
	return nil
}
