// Package netzone gives tests availability zones on one machine: each zone
// is a network namespace of its own, with its own address, so that the
// processes of a zone can be cut off from the others as well as killed.
//
// Topology of one Net (names carry a prefix unique to the test process):
//
//	zone a (netns)   eth0 10.213.Y.11 (TUN) ┐
//	zone b (netns)   eth0 10.213.Y.12 (TUN) ├── switch (goroutines of the
//	zone c (netns)   eth0 10.213.Y.13 (TUN) │   test process): delay, cut
//	host             nz…h 10.213.Y.1  (TUN) ┘
//
// All zones and the host share one /24, chosen under a machine-wide lock
// so that it overlaps no address or route of the host nor another test's.
// A zone has its loopback and its eth0, no default route: it reaches the
// other zones and the host's address on the switch (HostIP), nothing else.
// The switch reads each IPv4 packet from the sender's TUN device, holds it
// Config.Delay and writes it to the destination's: a round trip between
// two zones, or between a zone and the host, takes at least twice Delay;
// one inside a zone (over its loopback or its own address) never meets the
// switch. The switch stands where a bridge and `tc netem` qdiscs would:
// the kernels these tests run on have TUN devices but no sch_netem and no
// tc classifiers, and a switch of the test's own delays and drops packets
// exactly, the same on every kernel.
//
// Services of the host (PostgreSQL, etcd, the test process itself) are
// reached from a zone at HostIP: a listener on HostIP or on all addresses
// is reachable as it is, and Forward relays HostIP:port to a listener on
// 127.0.0.1 (what internal/pgtest and internal/etcdtest start). The test
// process reaches a zone's address directly, through the host's device.
//
// A process runs in a zone by Zone.Command (`ip netns exec`), which gives
// an *exec.Cmd for testproc.Launch or for the test to start itself, or by
// Zone.Serve, a `nimbus serve` in the zone. Zone.Listen, Zone.Dial and
// Zone.Do make sockets of the test process inside a zone. Zone.Cut drops
// every packet into and out of the zone, those on their way included, so
// that peers see silence, not errors, as across a real partition, until
// Zone.Heal; Zone.KillAll kills every process in the zone.
//
// New registers a cleanup that stops the switch (the TUN devices go with
// their descriptors), kills the zones' processes and removes the
// namespaces; a watchdog process does the same if the test binary dies,
// and New first removes what a crashed run of a process that no longer
// exists left behind.
//
// Making zones needs root or CAP_NET_ADMIN, /dev/net/tun and iproute2's ip.
// Where that is missing New skips the test with the reason; with
// NIMBUS_REQUIRE_NETNS set (scripts/test.sh sets it) it fails instead.
package netzone
