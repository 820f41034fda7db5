package webhdfs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Config configures a Client.
type Config struct {
	// Addr is the NameNode's HTTP address, "http://host:port".
	Addr string
	// User is the user.name sent when an operation's meta.User is empty.
	User string
	// Conns bounds the idle keep-alive connections kept per host; set it to
	// the number of concurrent callers so no request waits for a dial.
	Conns int
	// Timeout bounds one HTTP exchange (0: none beyond the caller's ctx).
	Timeout time.Duration
}

// DefaultConfig returns a client for the HDFS NameNode's default port on
// loopback.
func DefaultConfig() Config {
	return Config{Addr: "http://127.0.0.1:9870", User: "nimbus", Conns: 64, Timeout: 60 * time.Second}
}

// Validate reports an unusable configuration.
func (c Config) Validate() error {
	u, err := url.Parse(c.Addr)
	if err != nil {
		return fmt.Errorf("webhdfs: address %q: %w", c.Addr, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhdfs: address %q is not http://host:port", c.Addr)
	}
	if c.Conns < 1 {
		return errors.New("webhdfs: Conns must be at least 1")
	}
	if c.Timeout < 0 {
		return errors.New("webhdfs: negative timeout")
	}
	return nil
}

// Client is a WebHDFS client. It is safe for concurrent use; Close releases
// its idle connections.
//
// It speaks HTTP/1.1 with fasthttp's client rather than net/http's: the
// driver shares the machine's cores with the server it measures, and
// net/http's transport (a reader and a writer goroutine per connection, a
// hand-off to each per request) cost 95 µs of driver CPU per GETFILESTATUS at
// one client against fasthttp's 47 µs here, and a third of the throughput
// (bench/webhdfs/doc.go has the figures). Both systems are measured through
// the same client.
type Client struct {
	cfg  Config
	base string // Addr + "/webhdfs/v1"
	hc   *fasthttp.Client
}

// New returns a client; it does not contact the server.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{
		cfg:  cfg,
		base: strings.TrimRight(cfg.Addr, "/") + "/webhdfs/v1",
		hc: &fasthttp.Client{
			// One connection per concurrent caller; a caller beyond that
			// waits for a free one instead of failing.
			MaxConnsPerHost:     cfg.Conns,
			MaxConnWaitTimeout:  max(cfg.Timeout, time.Minute),
			MaxIdleConnDuration: 90 * time.Second,
			ReadTimeout:         cfg.Timeout,
			WriteTimeout:        cfg.Timeout,
			// Paths go out exactly as opURL escaped them.
			DisablePathNormalizing:   true,
			NoDefaultUserAgentHeader: true,
			ReadBufferSize:           16 << 10, // room for any NameNode's response headers
			Dial:                     (&fasthttp.TCPDialer{Concurrency: 0}).Dial,
		},
	}, nil
}

// Close closes idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// opURL builds the URL of op on path with user.name and extra parameters
// (name, value pairs).
func (c *Client) opURL(path, op, user string, kv ...string) string {
	if user == "" {
		user = c.cfg.User
	}
	var b strings.Builder
	b.Grow(len(c.base) + len(path) + 48)
	b.WriteString(c.base)
	b.WriteString((&url.URL{Path: path}).EscapedPath())
	b.WriteString("?op=")
	b.WriteString(op)
	b.WriteString("&user.name=")
	b.WriteString(url.QueryEscape(user))
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteByte('&')
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(kv[i+1]))
	}
	return b.String()
}

// response is what the client keeps of an HTTP answer.
type response struct {
	status   int
	location string // of a redirect
}

// do sends one request and returns the answer when its status is 2xx or
// 307; any other status is decoded into a meta error. The request is bounded
// by ctx's deadline, else by the configured timeout. decode, when not nil,
// reads a 2xx answer's body in place (it is reused once do returns).
func (c *Client) do(ctx context.Context, method, u string, body []byte, op, path string, decode func([]byte) error) (response, error) {
	if err := ctx.Err(); err != nil {
		return response{}, opErr(op, path, err)
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(u)
	if body != nil {
		req.Header.SetContentType("application/octet-stream")
		req.SetBodyRaw(body)
	}
	var err error
	if dl, ok := ctx.Deadline(); ok {
		err = c.hc.DoDeadline(req, resp, dl)
	} else if c.cfg.Timeout > 0 {
		err = c.hc.DoTimeout(req, resp, c.cfg.Timeout)
	} else {
		err = c.hc.Do(req, resp)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return response{}, opErr(op, path, err)
	}
	r := response{status: resp.StatusCode()}
	switch {
	case r.status == http.StatusTemporaryRedirect:
		r.location = string(resp.Header.Peek("Location"))
		return r, nil
	case r.status/100 != 2:
		return r, decodeError(op, path, r.status, resp.Body())
	}
	if decode != nil {
		if err := decode(resp.Body()); err != nil {
			return r, opErr(op, path, err)
		}
	}
	return r, nil
}

// twoStep sends op to the NameNode without data, follows the 307 to the
// DataNode and sends data there (CREATE with PUT, APPEND with POST). A server
// that accepts the data directly (no redirect) is fine too.
func (c *Client) twoStep(ctx context.Context, method, path, op, user string, data []byte, kv ...string) error {
	resp, err := c.do(ctx, method, c.opURL(path, op, user, kv...), nil, op, path, nil)
	if err != nil {
		return err
	}
	if resp.status != http.StatusTemporaryRedirect {
		if len(data) > 0 {
			return opErr(op, path, fmt.Errorf("webhdfs: %s answered without a redirect, data not sent", op))
		}
		return nil
	}
	if resp.location == "" {
		return opErr(op, path, errors.New("webhdfs: redirect without Location"))
	}
	if data == nil {
		data = []byte{}
	}
	_, err = c.do(ctx, method, resp.location, data, op, path, nil)
	return err
}

// getJSON sends a request and decodes the JSON answer into out (nil: the
// answer is not read).
func (c *Client) getJSON(ctx context.Context, method, path, op, user string, out any, kv ...string) error {
	var decode func([]byte) error
	if out != nil {
		decode = func(b []byte) error { return decodeJSON(b, out) }
	}
	_, err := c.do(ctx, method, c.opURL(path, op, user, kv...), nil, op, path, decode)
	return err
}
