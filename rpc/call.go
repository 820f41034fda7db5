package rpc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nimbus-fs/nimbus/api"
)

// CallHTTP sends req as one POST to baseURL+CallPath ("http://host:port")
// and returns the response. An operation error comes back inside the
// response; err is a transport failure (the request may or may not have been
// executed) or an HTTP error status.
func CallHTTP(ctx context.Context, hc *http.Client, baseURL string, req *api.Request, maxFrame int) (*api.Response, error) {
	resp, _, err := Invoke(ctx, hc, baseURL, req, maxFrame, nil)
	return resp, err
}

// StatusError is an HTTP error status answered to an invocation.
// Status 503 (busy: the request was not run, RetryAfter says when to come
// back, zero when the answer did not say) and 502 (the instance failed:
// the request may have run) are a gateway's; others say the request was
// malformed.
type StatusError struct {
	Status     int
	RetryAfter time.Duration
	Msg        string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("rpc: %s answered %d %s: %s", CallPath, e.Status, http.StatusText(e.Status), e.Msg)
}

// Invoke is CallHTTP with headers: hdr is added to the request (nil: none),
// and the answer's headers are returned with its response. An HTTP error
// status is a *StatusError.
func Invoke(ctx context.Context, hc *http.Client, baseURL string, req *api.Request, maxFrame int, hdr http.Header) (*api.Response, http.Header, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	// The request's frame is not from the buffer pool: net/http may still be
	// writing a body after Do has returned (a server that answered before
	// reading it all, such as a gateway refusing the call for its body
	// budget), and may read it again through GetBody to retry the request.
	out, err := AppendFrame(nil, req, maxFrame)
	if err != nil {
		return nil, nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+CallPath, bytes.NewReader(out))
	if err != nil {
		return nil, nil, err
	}
	for k, vs := range hdr {
		hreq.Header[k] = vs
	}
	hreq.Header.Set("Content-Type", ContentType)
	hresp, err := hc.Do(hreq)
	if err != nil {
		return nil, nil, err
	}
	defer hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(hresp.Body, 512))
		e := &StatusError{Status: hresp.StatusCode, Msg: string(bytes.TrimSpace(msg))}
		if s, err := strconv.Atoi(hresp.Header.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(min(s, 3600)) * time.Second
		}
		return nil, hresp.Header, e
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(hresp.Body)
	ib := getBuf()
	defer putBuf(ib)
	frame, err := ReadFrame(br, (*ib)[:0], maxFrame)
	br.Reset(nil)
	readerPool.Put(br)
	if err != nil {
		return nil, hresp.Header, fmt.Errorf("rpc: reading the %s answer: %w", CallPath, err)
	}
	*ib = frame
	resp := &api.Response{}
	if err := unmarshal(frame, resp); err != nil {
		return nil, hresp.Header, fmt.Errorf("%w: undecodable response: %v", ErrProtocol, err)
	}
	return resp, hresp.Header, nil
}
