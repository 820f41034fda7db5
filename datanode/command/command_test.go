package command

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
)

// The client signs what it sends and maps a DataNode's error codes to
// errors callers can test.
func TestClientErrors(t *testing.T) {
	key, err := clusterauth.New(bytes.Repeat([]byte{3}, clusterauth.SecretSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]struct {
		status int
		body   string
	}{
		PathInitRecovery:   {404, `{"code":"not_found","error":"blk_1_1: not found"}`},
		PathFinishRecovery: {409, `{"code":"stale_recovery","error":"recovery 3 asked, 4 started"}`},
		PathDelete:         {403, `{"code":"refused","error":"bad credential"}`},
		PathReplicate:      {500, `not json`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := key.Verify(r, body); err != nil {
			t.Errorf("%s: the client's request does not verify: %v", r.URL.Path, err)
		}
		a := answers[r.URL.Path]
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := &Client{Key: key}
	ctx := context.Background()
	b := blocks.ID{Block: 1, GenStamp: 1}
	if _, err := c.InitRecovery(ctx, addr, b, 2); !errors.Is(err, blocks.ErrNotFound) || !strings.Contains(err.Error(), addr) {
		t.Errorf("404 not_found: %v", err)
	}
	if err := c.FinishRecovery(ctx, addr, b, 3, 10); !errors.Is(err, ErrStaleRecovery) {
		t.Errorf("409 stale_recovery: %v", err)
	}
	if err := c.Delete(ctx, addr, []blocks.ID{b}); !errors.Is(err, ErrRefused) {
		t.Errorf("403: %v", err)
	}
	if err := c.Replicate(ctx, addr, b, nil); err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Errorf("500 without a JSON body: %v", err)
	}
	if err := (&Client{}).Delete(ctx, addr, nil); err == nil {
		t.Error("a client without a key sent a command")
	}
}
