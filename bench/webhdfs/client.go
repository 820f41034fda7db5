package webhdfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
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
type Client struct {
	cfg  Config
	base string // Addr + "/webhdfs/v1"
	hc   *http.Client
	tr   *http.Transport
}

// New returns a client; it does not contact the server.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               nil, // loopback benchmarks must never go through a proxy
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4 * cfg.Conns,
		MaxIdleConnsPerHost: cfg.Conns,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{
		cfg:  cfg,
		base: strings.TrimRight(cfg.Addr, "/") + "/webhdfs/v1",
		tr:   tr,
		hc: &http.Client{
			Transport: tr,
			Timeout:   cfg.Timeout,
			// Redirects are followed by hand: CREATE must send its data only
			// to the DataNode, as Hadoop's own client does.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// Close closes idle connections.
func (c *Client) Close() error {
	c.tr.CloseIdleConnections()
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

// do sends one request and returns the response when its status is 2xx or
// 307; any other status is decoded into a meta error. The caller closes the
// body (with drain).
func (c *Client) do(ctx context.Context, method, u string, body []byte, op, path string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, opErr(op, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, opErr(op, path, err)
	}
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusTemporaryRedirect {
		return resp, nil
	}
	defer drain(resp)
	return nil, decodeError(op, path, resp)
}

// twoStep sends op to the NameNode without data, follows the 307 to the
// DataNode and sends data there (CREATE with PUT, APPEND with POST). A server
// that accepts the data directly (no redirect) is fine too.
func (c *Client) twoStep(ctx context.Context, method, path, op, user string, data []byte, kv ...string) error {
	resp, err := c.do(ctx, method, c.opURL(path, op, user, kv...), nil, op, path)
	if err != nil {
		return err
	}
	loc := resp.Header.Get("Location")
	redirected := resp.StatusCode == http.StatusTemporaryRedirect
	drain(resp)
	if !redirected {
		if len(data) > 0 {
			return opErr(op, path, fmt.Errorf("webhdfs: %s answered without a redirect, data not sent", op))
		}
		return nil
	}
	if loc == "" {
		return opErr(op, path, errors.New("webhdfs: redirect without Location"))
	}
	if data == nil {
		data = []byte{}
	}
	resp, err = c.do(ctx, method, loc, data, op, path)
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// getJSON sends a request and decodes the JSON answer into out.
func (c *Client) getJSON(ctx context.Context, method, path, op, user string, out any, kv ...string) error {
	resp, err := c.do(ctx, method, c.opURL(path, op, user, kv...), nil, op, path)
	if err != nil {
		return err
	}
	defer drain(resp)
	if out == nil {
		return nil
	}
	if err := decodeJSON(resp.Body, out); err != nil {
		return opErr(op, path, err)
	}
	return nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
