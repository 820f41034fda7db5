// Package local is the embedded blocks.Store: one in-process DataNode that
// keeps replicas as files on local disk in HDFS's layout (layout.go) with
// HDFS's meta-file format (meta.go): a 7-byte header and a big-endian
// CRC32C per 512-byte chunk.
//
// # Usage
//
//	st, err := local.Open(filepath.Join(dataDir, "blocks"), local.DefaultConfig())
//	defer st.Close()
//	w, err := st.Create(ctx, blocks.ID{Block: 1, GenStamp: 1})
//	_, err = io.Copy(w, src)
//	n, err := w.Finalize(ctx)
//	rc, err := st.Read(ctx, blocks.ID{Block: 1, GenStamp: 1}, 0, -1)
//
// # Durability
//
// Writer.Sync writes the buffered data and checksums, fsyncs the data file,
// then the meta file (and, the first time, the rbw directory). A move
// between rbw and finalized is a rename of the data file, then of the meta
// file, then an fsync of both directories; Open completes or undoes a move
// that a crash cut in two (scan.go). After a crash, a being-written
// replica's length is the longest prefix whose chunks verify, which
// includes everything synced: the checksum of a chunk left partial by a
// Sync is never overwritten before the data that extends it is synced
// (writer.go explains why).
//
// # Speed
//
// Writers buffer Config.BufferSize bytes (1 MiB) and write each buffer with
// one pwrite for the data and one for its checksums, computed over the
// whole buffer with the CPU's CRC32C instructions. Readers read a buffer's
// worth of chunks and their checksums with two preads into a pooled buffer
// and verify them there; nothing is allocated per chunk.
package local
