package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/bench/webhdfs"
	"github.com/nimbus-fs/nimbus/client"
)

// openTarget connects the target named by c.target, sized for clients
// concurrent callers, and returns it with the function that releases it (and,
// for the embedded target, stops the server and removes its directory).
//
//	""                   a fresh embedded Nimbus (startEmbedded), over its RPC
//	nimbus://HOST:PORT   a running Nimbus over its RPC
//	webhdfs://HOST:PORT  any WebHDFS server (Nimbus's gateway or HDFS)
func openTarget(ctx context.Context, c *benchCommon, clients int, stderr io.Writer) (*bench.Env, func(), error) {
	user := client.DefaultUser()
	if c.user != "" {
		user.Name = c.user
	}
	env := &bench.Env{Target: c.target, User: user}
	scheme, hostport, err := splitTarget(c.target)
	if err != nil {
		return nil, nil, err
	}
	var profile *benchProfile
	if c.profile != "" {
		p, err := lookupProfile(c.profile)
		if err != nil {
			return nil, nil, err
		}
		profile = &p
		env.Profile, env.ServerFlags = c.profile, p.flags
		if p.platform && scheme == "embedded" {
			return nil, nil, fmt.Errorf("profile %s (%s) runs on a platform: start `nimbus serve %s --store postgres://... --coordinator etcd://...` and pass --target nimbus://HOST:PORT (the gateway's address)",
				c.profile, p.help, strings.Join(p.flags, " "))
		}
		if p.platform {
			c.hybrid = true // a platform is reached through its gateway
		}
		if scheme != "embedded" {
			fmt.Fprintf(stderr, "nimbus bench: profile %s labels the results; %s must run with %s\n", c.profile, c.target, strings.Join(p.flags, " "))
		}
	}
	stop := func() {}
	switch scheme {
	case "embedded":
		addr, stopServer, err := startEmbedded(ctx, stderr, profile)
		if err != nil {
			return nil, nil, fmt.Errorf("start the embedded target: %w", err)
		}
		env.Target = "embedded"
		hostport = strings.TrimPrefix(addr, "http://")
		stop = stopServer
		fallthrough
	case "nimbus":
		opts := client.Options{Conns: c.conns, Job: c.job, Hybrid: c.hybrid, StragglerFactor: c.straggler}
		if profile != nil && profile.client != nil {
			profile.client(&opts)
		}
		cl, err := client.Dial(ctx, "http://"+hostport, opts)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("dial %s: %w", hostport, err)
		}
		env.FS, env.Client, env.System = cl, cl.ClientName(), "nimbus-rpc"
		if c.hybrid {
			env.System = "nimbus-hybrid"
			env.Transport = func() (int64, int64) { h := cl.HybridStats(); return h.TCP, h.HTTP }
		}
		env.MetricsURL = "http://" + hostport + "/metrics"
		stopServer := stop
		stop = func() { cl.Close(); stopServer() }
	case "webhdfs":
		wc, err := webhdfs.New(webhdfs.Config{Addr: "http://" + hostport, User: user.Name, Conns: max(clients, 2)})
		if err != nil {
			return nil, nil, err
		}
		env.FS, env.Client = wc, "nimbus-bench"
		env.System, env.MetricsURL = webhdfs.Probe(ctx, "http://"+hostport)
		stop = func() { wc.Close() }
	}
	if c.label != "" {
		env.System = c.label
	}
	return env, stop, nil
}

// splitTarget parses --target into a scheme (embedded, nimbus, webhdfs) and
// host:port.
func splitTarget(t string) (scheme, hostport string, err error) {
	if t == "" {
		return "embedded", "", nil
	}
	u, err := url.Parse(t)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", "", fmt.Errorf("bad --target %q: want nimbus://HOST:PORT or webhdfs://HOST:PORT", t)
	}
	switch u.Scheme {
	case "nimbus", "webhdfs":
		return u.Scheme, u.Host, nil
	}
	return "", "", fmt.Errorf("bad --target %q: unknown scheme %q (nimbus or webhdfs)", t, u.Scheme)
}
