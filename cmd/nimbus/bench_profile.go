package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/server"
)

// benchProfile is a baseline of the λFS evaluation as a set of
// `nimbus serve` flags: the same code, configured. A profile applies to
// the embedded server a run starts; against a running server (--target)
// it only labels the results, and the server must have been started with
// its flags.
type benchProfile struct {
	help  string
	flags []string
	apply func(*server.Config)
	// platform: the profile is a platform's (nimbus serve --platform
	// local, over PostgreSQL and etcd), reached through its gateway with
	// the hybrid client: no embedded target; client sets the client's
	// options (the share of HTTP invocations).
	platform bool
	client   func(*client.Options)
}

const profileCacheBytes = 256 << 20

var benchProfiles = map[string]benchProfile{
	"hopsfs": {
		help:  "stateless NameNodes, no metadata cache (HopsFS)",
		flags: []string{"--cache-bytes", "0"},
		apply: func(c *server.Config) { c.CacheBytes = 0 },
	},
	"hopsfs-cache": {
		help:  "a fixed pool of caching NameNodes, no scaling (here: one, with a 256 MiB cache)",
		flags: []string{"--cache-bytes", fmt.Sprint(profileCacheBytes)},
		apply: func(c *server.Config) { c.CacheBytes = profileCacheBytes },
	},
	// The platform's profiles (λFS's comparisons): the gateway runs with
	// the flags, plus --store postgres://... and --coordinator etcd://...,
	// and the bench reaches it with the hybrid client.
	"lambda": {
		help:     "the elastic layer, scaling on (λFS): instances started with load and reclaimed when idle, hybrid HTTP/TCP RPC",
		flags:    []string{"--platform", "local", "--deployments", "2", "--cache-bytes", fmt.Sprint(profileCacheBytes), "--concurrency", "4", "--min-instances", "1", "--max-instances-per-deployment", "4", "--max-instances", "8", "--keep-alive", "10s"},
		platform: true,
	},
	"limited": {
		help:     "λFS with scaling limited to 2 instances per deployment (the paper's Figure 14)",
		flags:    []string{"--platform", "local", "--deployments", "2", "--cache-bytes", fmt.Sprint(profileCacheBytes), "--concurrency", "4", "--min-instances", "1", "--max-instances-per-deployment", "2", "--max-instances", "4", "--keep-alive", "10s"},
		platform: true,
	},
	"disabled": {
		help:     "λFS with scaling disabled: one instance per deployment, always (the paper's Figure 14)",
		flags:    []string{"--platform", "local", "--deployments", "2", "--cache-bytes", fmt.Sprint(profileCacheBytes), "--concurrency", "64", "--min-instances", "1", "--max-instances-per-deployment", "1", "--max-instances", "2"},
		platform: true,
	},
	"http-only": {
		help:     "a fixed pool of caching instances reached by HTTP invocations only (InfiniCache-like)",
		flags:    []string{"--platform", "local", "--deployments", "2", "--cache-bytes", fmt.Sprint(profileCacheBytes), "--concurrency", "64", "--min-instances", "2", "--max-instances-per-deployment", "2", "--max-instances", "4"},
		platform: true,
		client:   func(o *client.Options) { o.HTTPShare = 1 },
	},
}

// profileNames lists the profiles, for usage text.
func profileNames() string {
	names := make([]string, 0, len(benchProfiles))
	for n := range benchProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// lookupProfile returns the named profile, or an error naming the others.
func lookupProfile(name string) (benchProfile, error) {
	p, ok := benchProfiles[name]
	if !ok {
		return p, fmt.Errorf("unknown profile %q (one of %s)", name, profileNames())
	}
	return p, nil
}
