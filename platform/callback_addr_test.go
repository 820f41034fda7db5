package platform

import (
	"net/http"
	"testing"
)

// The forwarded callback endpoint names the host the client connected
// from, with the port it named; a malformed one is dropped with its token;
// none stays none.
func TestPinCallback(t *testing.T) {
	for _, c := range []struct {
		claimed, remote, want string
	}{
		{"10.1.1.1:5432", "192.0.2.7:40000", "192.0.2.7:5432"},
		{"127.0.0.1:4000", "192.0.2.7:40000", "192.0.2.7:4000"},
		{"[::]:4000", "127.0.0.1:40000", "127.0.0.1:4000"},
		{"tcp://1.2.3.4:5", "127.0.0.1:40000", ""},
		{"1.2.3.4:0", "127.0.0.1:40000", ""},
		{"", "127.0.0.1:40000", ""},
	} {
		h := http.Header{}
		if c.claimed != "" {
			h.Set("Nimbus-Callback", c.claimed)
			h.Set("Nimbus-Callback-Token", "tok")
		}
		pinCallback(h, c.remote)
		if got := h.Get("Nimbus-Callback"); got != c.want {
			t.Errorf("%q from %s: forwarded %q, want %q", c.claimed, c.remote, got, c.want)
		}
		if tok := h.Get("Nimbus-Callback-Token"); (tok != "") != (c.want != "") {
			t.Errorf("%q from %s: token %q", c.claimed, c.remote, tok)
		}
	}
}
