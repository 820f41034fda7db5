// Package netzone gives tests availability zones on one machine: each zone
// is a network namespace of its own, with its own address, so that the
// processes of a zone can be cut off from the others as well as killed.
//
// Topology of one Net (all names carry a prefix unique to the test):
//
//	zone a (netns)         core (netns)                host
//	eth0 10.213.Y.11 ──veth── za ┐
//	zone b (netns)               ├─ br0 (bridge)
//	eth0 10.213.Y.12 ──veth── zb ┤
//	zone c (netns)               │
//	eth0 10.213.Y.13 ──veth── zc ┤
//	                             └─ hst ──veth── nz…h 10.213.Y.1
//
// All zones and the host share one /24 on the core's bridge, chosen so that
// it overlaps no address or route of the host. A zone has its loopback and
// its eth0, no default route: it reaches the other zones and the host's
// address on the bridge (HostIP), nothing else. Every packet that leaves a
// zone's eth0 waits Config.Delay in a netem qdisc, so a round trip between
// two zones, or between a zone and the host, takes at least twice Delay,
// and one inside a zone (over its loopback or its own address) none.
//
// Services of the host (PostgreSQL, etcd, the test process itself) are
// reached from a zone at HostIP: a listener on HostIP or on all addresses
// is reachable as it is, and Forward relays HostIP:port to a listener on
// 127.0.0.1 (what internal/pgtest and internal/etcdtest start). The test
// process reaches a zone's address directly, through the host's veth.
//
// A process runs in a zone by Zone.Command (`ip netns exec`), which gives
// an *exec.Cmd for testproc.Launch or for the test to start itself, or by
// Zone.Serve, a `nimbus serve` in the zone. Zone.Listen and Zone.Dial make
// sockets of the test process inside a zone. Zone.Cut drops every packet
// into and out of the zone (netem loss 100% on both ends of its link, so
// peers see silence, not errors, as in a real partition) until Zone.Heal;
// Zone.KillAll kills every process in the zone.
//
// New registers a cleanup that kills the zones' processes and removes the
// namespaces and the host's veth; a watchdog process does the same if the
// test binary dies, and New first removes what a crashed run of a process
// that no longer exists left behind.
//
// Making namespaces needs root or CAP_NET_ADMIN, and iproute2 (ip, tc).
// Where that is missing New skips the test with the reason; with
// NIMBUS_REQUIRE_NETNS set (scripts/test.sh sets it) it fails instead.
package netzone
