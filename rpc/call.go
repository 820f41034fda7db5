package rpc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/nimbus-fs/nimbus/api"
)

// CallHTTP sends req as one POST to baseURL+CallPath ("http://host:port")
// and returns the response. An operation error comes back inside the
// response; err is a transport failure (the request may or may not have been
// executed) or an HTTP error status.
func CallHTTP(ctx context.Context, hc *http.Client, baseURL string, req *api.Request, maxFrame int) (*api.Response, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	ob := getBuf()
	defer putBuf(ob)
	out, err := AppendFrame((*ob)[:0], req, maxFrame)
	if err != nil {
		return nil, err
	}
	*ob = out
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+CallPath, bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", ContentType)
	hresp, err := hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(hresp.Body, 512))
		return nil, fmt.Errorf("rpc: %s answered %s: %s", CallPath, hresp.Status, bytes.TrimSpace(msg))
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(hresp.Body)
	ib := getBuf()
	defer putBuf(ib)
	frame, err := ReadFrame(br, (*ib)[:0], maxFrame)
	br.Reset(nil)
	readerPool.Put(br)
	if err != nil {
		return nil, fmt.Errorf("rpc: reading the %s answer: %w", CallPath, err)
	}
	*ib = frame
	resp := &api.Response{}
	if err := unmarshal(frame, resp); err != nil {
		return nil, fmt.Errorf("%w: undecodable response: %v", ErrProtocol, err)
	}
	return resp, nil
}
