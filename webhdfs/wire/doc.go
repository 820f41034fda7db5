// Package wire holds the WebHDFS JSON shapes that both directions of Nimbus
// use — the gateway (package webhdfs) writes them, the benchmark's WebHDFS
// client (bench/webhdfs) reads them — and the one table between meta.Kind and
// the RemoteException a Hadoop client re-creates. The shapes follow Hadoop's
// JsonUtil field for field; Hadoop's client (JsonUtilClient) and the Python
// clients read these names.
//
// It depends only on meta. Shapes only the gateway writes (checksums, block
// locations, quota usage) stay in package webhdfs.
package wire
