package platform

import (
	"net/http"

	"github.com/nimbus-fs/nimbus/rpc"
)

// pinCallback rewrites the callback endpoint an invocation names
// (rpc.HeaderCallback, forwarded to the instance with the other Nimbus-*
// headers) to the host the client connected to the gateway from, keeping
// the port it named (rpc.PinCallback); a malformed one is dropped, token
// and all, and the client falls back to dialling the instance. The
// instance sees the gateway's address, not the client's, and trusts the
// header from it: without this, any client could make an instance open a
// connection to any host and port it names and write a hello line there.
func pinCallback(h http.Header, remoteAddr string) {
	claimed := h.Get(rpc.HeaderCallback)
	if claimed == "" {
		return
	}
	ep, err := rpc.PinCallback(claimed, remoteAddr)
	if err != nil {
		h.Del(rpc.HeaderCallback)
		h.Del(rpc.HeaderCallbackToken)
		return
	}
	h.Set(rpc.HeaderCallback, ep)
}
