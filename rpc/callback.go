package rpc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Connect-back (docs/ELASTIC.md, "Hybrid RPC and resilient clients").
//
// A client process runs one callback endpoint, a TCP listener, and names it
// in every HTTP invocation (HeaderCallback, HeaderCallbackToken). The
// instance that serves the invocation dials that endpoint, unless it holds
// a live connection to it already, and opens with one hello line:
//
//	NIMBUS-HELLO 1 <token> <instance id> <instance base URL>\n
//
// The endpoint answers "OK\n" when the token is its own, and from then on
// the connection carries frames exactly as an upgraded ConnPath connection
// does, the instance in the server's role and the client in the client's;
// anything else ("NO <reason>\n", or a close) refuses it.

// Headers of the HTTP invocation path (CallPath). A gateway forwards every
// Nimbus-* header of an invocation to the instance it picks, HeaderCallback
// pinned to the host the client connected from (PinCallback).
const (
	// HeaderDeployment names the deployment (decimal) an invocation is
	// for; a gateway routes by it, a plain server ignores it.
	HeaderDeployment = "Nimbus-Deployment"
	// HeaderInstance, on an answer, is "<instance id> <instance base URL>":
	// the instance that served it.
	HeaderInstance = "Nimbus-Instance"
	// HeaderCallback is the host:port of the client process's callback
	// endpoint; HeaderCallbackToken the token the endpoint accepts.
	HeaderCallback      = "Nimbus-Callback"
	HeaderCallbackToken = "Nimbus-Callback-Token"
	// HeaderGateway, on a gateway's answer to ConnPath (501), says that
	// the address is a platform gateway: Dial fails with ErrGateway, and a
	// client switches to invocations (client.Options.Hybrid).
	HeaderGateway = "Nimbus-Gateway"
)

// HelloVersion is the version the hello line carries.
const HelloVersion = 1

// helloMagic opens the hello line.
const helloMagic = "NIMBUS-HELLO"

// maxHelloLine bounds the hello line and the answer to it.
const maxHelloLine = 1024

// ErrHelloRefused: the endpoint did not accept the hello.
var ErrHelloRefused = errors.New("rpc: connect-back refused")

// Hello is what an instance says when it connects back to a client.
type Hello struct {
	Token    string // the endpoint's token, from HeaderCallbackToken
	Instance string // the instance's id (a member id; "0" for a plain server)
	URL      string // the instance's base URL, "http://host:port"
}

// helloField reports whether s is usable as one field of the hello line:
// 1 to 512 printable ASCII bytes without spaces.
func helloField(s string) bool {
	if len(s) == 0 || len(s) > 512 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Validate reports a hello that cannot be sent.
func (h Hello) Validate() error {
	if !helloField(h.Token) || !helloField(h.Instance) || !helloField(h.URL) {
		return fmt.Errorf("%w: hello fields must be 1-512 printable bytes without spaces: %q %q %q", ErrProtocol, h.Token, h.Instance, h.URL)
	}
	if len(helloMagic)+len(h.Token)+len(h.Instance)+len(h.URL)+8 > maxHelloLine {
		return fmt.Errorf("%w: hello longer than %d bytes", ErrProtocol, maxHelloLine)
	}
	return nil
}

// AppendHello appends h's hello line to b.
func AppendHello(b []byte, h Hello) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return b, err
	}
	return fmt.Appendf(b, "%s %d %s %s %s\n", helloMagic, HelloVersion, h.Token, h.Instance, h.URL), nil
}

// ParseHello decodes one hello line, with or without its newline.
func ParseHello(line []byte) (Hello, error) {
	s := strings.TrimSuffix(string(line), "\n")
	f := strings.Split(s, " ")
	if len(f) != 5 || f[0] != helloMagic {
		return Hello{}, fmt.Errorf("%w: not a hello line", ErrProtocol)
	}
	if f[1] != "1" {
		return Hello{}, fmt.Errorf("%w: hello version %.8q, want %d", ErrProtocol, f[1], HelloVersion)
	}
	h := Hello{Token: f[2], Instance: f[3], URL: f[4]}
	if err := h.Validate(); err != nil {
		return Hello{}, err
	}
	return h, nil
}

// readLine reads one line of at most maxHelloLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHelloLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, maxHelloLine)
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// ReadHello reads and decodes the hello line an instance sends.
func ReadHello(br *bufio.Reader) (Hello, error) {
	line, err := readLine(br)
	if err != nil {
		return Hello{}, err
	}
	return ParseHello(line)
}

// AcceptHello answers a hello: accepted, or refused with the reason.
func AcceptHello(nc net.Conn, ok bool, reason string) error {
	ans := "OK\n"
	if !ok {
		ans = "NO " + strings.ReplaceAll(reason, "\n", " ") + "\n"
	}
	_, err := nc.Write([]byte(ans))
	return err
}

// callbackKey names one callback endpoint of one client process.
func callbackKey(endpoint, token string) string { return endpoint + " " + token }

// maxCallbacks bounds the endpoints a server is dialling or connected back
// to at once (each a connection and a goroutine); past it, invocations
// are answered without connecting back, and their clients fall back to
// dialling. Refusals are remembered apart, in a cache of maxRefused
// (callbackTable).
const maxCallbacks = 4096

// callbackDialTimeout bounds the dial of a callback endpoint.
const callbackDialTimeout = 5 * time.Second

// refusedFor is how long a server does not dial an endpoint that refused
// its hello or could not be reached, unless it forgets the refusal sooner
// (callbackTable).
const refusedFor = time.Minute

// PinCallback returns the callback endpoint an instance may dial for an
// invocation that named claimed (HeaderCallback, "host:port") and came
// from remoteAddr (http.Request.RemoteAddr): the host the client connected
// from, with the port it claimed. A client names its own port (it chose
// its listener), but never the host: otherwise any client could make an
// instance open connections to any host and port and write a line there,
// as a proxy into the instance's network. A platform's gateway rewrites
// the header with it before forwarding (the instance sees the gateway's
// address, not the client's).
func PinCallback(claimed, remoteAddr string) (string, error) {
	_, port, err := net.SplitHostPort(claimed)
	if err != nil {
		return "", fmt.Errorf("rpc: bad %s %.64q: %w", HeaderCallback, claimed, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("rpc: bad %s %.64q: port %.8q is not 1 to 65535", HeaderCallback, claimed, port)
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err == nil && host == "" {
		err = errors.New("no host")
	}
	if err != nil {
		return "", fmt.Errorf("rpc: connect-back: the client's address %.64q: %w", remoteAddr, err)
	}
	return net.JoinHostPort(host, port), nil
}

// callbackTarget is the endpoint a server dials for an invocation naming
// claimed from remoteAddr: pinned to the peer's host (PinCallback), or,
// with trustLoopback (ServerOptions.TrustLoopbackCallback), claimed as
// named when the invocation came over loopback (from the platform's
// gateway, which has pinned it to its own client's host, or from a
// process on this machine, which could open such connections itself).
func callbackTarget(claimed, remoteAddr string, trustLoopback bool) (string, bool) {
	pinned, err := PinCallback(claimed, remoteAddr)
	if err != nil {
		return "", false
	}
	if trustLoopback {
		host, _, _ := net.SplitHostPort(remoteAddr)
		if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
			return claimed, true
		}
	}
	return pinned, true
}

// connectBack dials the callback endpoint of an invocation's client, in
// the background, unless the server holds a connection to it, is dialling
// it, or was refused by it lately (callbackTable); then it serves frames
// on the connection as on an upgraded one.
func (s *Server) connectBack(endpoint, token, base string) {
	if s.opts.NoConnectBack || !helloField(token) || !helloField(endpoint) {
		return
	}
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return
	}
	key := callbackKey(endpoint, token)
	s.mu.Lock()
	if s.mu.shutdown || !s.mu.callbacks.begin(key, host, time.Now()) {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.met.callbacks.WithLabelValues("dialled").Inc()
	go func() {
		err := s.serveCallback(key, endpoint, Hello{Token: token, Instance: s.instanceID(), URL: base})
		s.mu.Lock()
		if err != nil {
			s.mu.callbacks.failed(key, time.Now())
		} else {
			s.mu.callbacks.ended(key)
		}
		s.mu.Unlock()
	}()
}

// serveCallback dials endpoint, says hello, and serves the connection until
// it ends. Its error is why the connection never served (unreachable,
// refused).
func (s *Server) serveCallback(key, endpoint string, h Hello) error {
	// A client that cannot be reached (behind NAT) must not hold a
	// goroutine for long: it falls back to dialling after its own wait.
	nc, err := net.DialTimeout("tcp", endpoint, min(s.opts.FrameTimeout, callbackDialTimeout))
	if err != nil {
		s.met.callbacks.WithLabelValues("unreachable").Inc()
		s.log.Info("rpc: cannot connect back to a client", "endpoint", endpoint, "err", err)
		return err
	}
	line, err := AppendHello(nil, h)
	if err == nil {
		_ = nc.SetDeadline(time.Now().Add(s.opts.FrameTimeout))
		_, err = nc.Write(line)
	}
	br := bufio.NewReaderSize(nc, 32<<10)
	var ans []byte
	if err == nil {
		ans, err = readLine(br)
	}
	if err == nil && string(ans) != "OK\n" {
		err = fmt.Errorf("%w: %s", ErrHelloRefused, strings.TrimSpace(string(ans)))
	}
	if err != nil {
		nc.Close()
		s.met.callbacks.WithLabelValues("refused").Inc()
		s.log.Info("rpc: connect-back refused", "endpoint", endpoint, "err", err)
		return err
	}
	_ = nc.SetDeadline(time.Time{})
	s.met.callbacks.WithLabelValues("accepted").Inc()
	s.mu.Lock()
	s.mu.callbacks.connected(key)
	s.mu.Unlock()
	c := s.newConn(nc, br)
	if c == nil {
		return nil
	}
	c.serve()
	return nil
}

// instanceID is the id the server gives in HeaderInstance and its hello.
func (s *Server) instanceID() string {
	if in := s.instance.Load(); in != nil && in.id != "" {
		return in.id
	}
	return "0"
}

// advertiseURL is the base URL the server gives in HeaderInstance and its
// hello; "" means the Host the invocation was addressed to.
func (s *Server) advertiseURL() string {
	if in := s.instance.Load(); in != nil {
		return in.url
	}
	return ""
}

// instanceName is what a server calls itself (ServerOptions.InstanceID,
// AdvertiseURL; SetInstance).
type instanceName struct{ id, url string }

// SetInstance replaces ServerOptions.InstanceID and AdvertiseURL: a server
// knows its member id and its address only once it has joined its
// coordinator and bound its port, after NewServer. Safe for concurrent
// use; answers already under way keep the name they read.
func (s *Server) SetInstance(id, advertiseURL string) {
	s.instance.Store(&instanceName{id: id, url: advertiseURL})
}
