package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nimbus-fs/nimbus/server"
)

// benchProfile is a baseline of the λFS evaluation (issue 30) as a set of
// `nimbus serve` flags: the same code, configured. A profile applies to
// the embedded server a run starts; against a running server (--target)
// it only labels the results, and the server must have been started with
// its flags.
type benchProfile struct {
	help  string
	flags []string
	apply func(*server.Config)
	// needs, when set, is why the profile cannot run yet.
	needs string
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
	"http-only": {help: "HTTP invocations only, a fixed pool (InfiniCache-like)", needs: "the hybrid HTTP/TCP RPC of issue 29"},
	"lambda":    {help: "the elastic layer, scaling on (λFS)", needs: "the serverless platform of issue 29"},
	"limited":   {help: "λFS with scaling limited (the paper's Figure 14)", needs: "the serverless platform of issue 29"},
	"disabled":  {help: "λFS with scaling disabled (the paper's Figure 14)", needs: "the serverless platform of issue 29"},
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

// lookupProfile returns the named profile, or an error naming the others
// or saying what it waits for.
func lookupProfile(name string) (benchProfile, error) {
	p, ok := benchProfiles[name]
	if !ok {
		return p, fmt.Errorf("unknown profile %q (one of %s)", name, profileNames())
	}
	if p.needs != "" {
		return p, fmt.Errorf("profile %s (%s) needs %s, which is not built yet", name, p.help, p.needs)
	}
	return p, nil
}
