// Package webhdfs serves Hadoop's WebHDFS REST API (/webhdfs/v1/<path>?op=...)
// over any meta.FileSystem, so that unmodified WebHDFS clients — Hadoop's
// WebHdfsFileSystem (hadoop fs, Spark, distcp), Python's hdfs package, fsspec
// and pandas — can use Nimbus.
//
// Usage:
//
//	h, err := webhdfs.New(fs, cfg) // or webhdfs.NewHandler(fs, cfg) for a validated cfg
//	mux.Handle(webhdfs.PathPrefix+"/", h)
//	srv := &http.Server{Handler: h.Intercept(mux)}
//
// Mount the handler on PathPrefix+"/" without stripping the prefix: the handler
// parses the full request path. Intercept hands it WebHDFS requests before an
// http.ServeMux can redirect a path with "." or ".." components to another
// path; the gateway refuses such paths, as HDFS does.
//
// # Protocol
//
// The gateway follows the WebHDFS specification and, where it is silent, what
// Hadoop's NameNode and DataNode do (NamenodeWebHdfsMethods, the DataNode's
// WebHdfsHandler, JsonUtil, ExceptionHandler):
//
//   - CREATE, APPEND, OPEN and GETFILECHECKSUM are two-step: the first request
//     answers 307 Temporary Redirect with a Location on the same server
//     (Config.Advertise, else the request's Host) carrying the same parameters
//     plus data=true; with noredirect=true it answers 200 {"Location": ...}.
//     A request that already carries data=true (the redirect target, or a
//     client using HttpFS's one-step upload) is served directly. The data URL
//     holds no state: a client may reuse one APPEND URL for many appends.
//   - Uploads are streamed: the body, chunked or not, is fed to
//     meta.FileSystem.Write in pieces of at most Config.WriteChunk bytes under a
//     lease holder name unique to the request. An upload whose body is cut
//     short, stalls for Config.BodyIdleTimeout or fails otherwise publishes
//     nothing: a new file is removed, an overwritten one kept (a large body
//     is staged beside it and renamed over it once complete), an append
//     undone (docs/WEBHDFS.md). Downloads are read in ranges
//     of Config.ReadChunk bytes. Memory per request is bounded by these sizes,
//     never by the file size.
//   - Parameter names are case-insensitive, unknown parameters are ignored.
//   - The caller is user.name (default Config.DefaultUser, "dr.who" as in
//     HDFS); doas=U acts as U when the real user is Config.Superuser and is
//     refused with AccessControlException otherwise.
//   - Every error carries a RemoteException JSON body whose exception class
//     and HTTP status come from one table keyed by meta.Kind (wire.Exceptions).
//
// # Concurrency
//
// A Handler is safe for concurrent use; it keeps no per-client state.
package webhdfs
