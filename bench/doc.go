// Package bench is the measuring instrument of Nimbus: the workloads behind
// `nimbus bench` (prepare, micro, echo, bigdir), written once against the
// Target interface so that Nimbus over its RPC, Nimbus over WebHDFS and HDFS
// over WebHDFS run exactly the same code.
//
// A run has three parts, each in its own file:
//
//   - tree.go: the namespace generator. A Tree is a deterministic function of
//     (root, files, seed) with the statistics HopsFS took from Spotify's
//     cluster (mean file depth 7, ~16 files and ~2 subdirectories per
//     directory, names of ~34 bytes). It is never stored: prepare writes a
//     small Manifest into the target, and later runs rebuild the same Tree
//     from it.
//   - runner.go: closed-loop clients. Each client owns one Op (argument
//     preparation outside the timed section, the call inside it), one HDR
//     histogram and one per-second series; nothing is shared while a run is
//     measured, so the driver's own cost is one time.Now pair per operation.
//   - result.go: the Result record written to JSON (the schema is documented
//     in docs/BENCH-TOOL.md) and the table printed on stdout.
//
// The package does not know how to start a server or dial a client: the
// caller (cmd/nimbus) builds an Env holding a Target and hands it in. The
// WebHDFS target lives in bench/webhdfs, the charts in bench/plot.
package bench
