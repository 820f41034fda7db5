// Package dataxfer speaks HDFS's DataTransferProtocol, version 28, on both
// sides: the Server a DataNode runs over its blocks.Store, and the Client
// that reads, writes, checksums and transfers blocks. Its bytes on the wire
// are Hadoop 3's (messages from api/hadoop), so unmodified HDFS clients use
// Nimbus DataNodes and Nimbus's client uses them the same way.
//
// # Wire
//
// An op is a 2-byte version (28), a 1-byte op code and the op's protobuf,
// varint-delimited; the DataNode answers a BlockOpResponseProto. Block data
// moves in packets: a 4-byte payload length (itself, the checksums and the
// data), a 2-byte header length, a PacketHeaderProto, a CRC32C per 512-byte
// chunk and the data. A write is acknowledged packet by packet with
// PipelineAckProto, one status per DataNode from the one that sends the ack
// to the end of the pipeline. Every length read from a peer is bounded
// before anything of that size is allocated (MaxOpSize, MaxPacketSize), and
// a packet's buffer grows only with bytes that actually arrived.
//
// # Server
//
// READ_BLOCK sends chunk-aligned packets of data the store verified, with
// their CRC32C, then an empty last packet, and reads the client's status.
// A replica chunk that fails its stored checksum is never sent: the stream
// stops before it and Hooks.Corrupt is told. WRITE_BLOCK opens the replica
// as its stage says (create, append, streaming or append recovery, close
// recovery, transfer), connects to the next DataNode of the pipeline and
// sends it the op with the rest of the targets, answers with firstBadLink
// naming a DataNode that failed, then stores and forwards each packet while
// a responder merges this DataNode's status into the downstream acks. A
// downstream that fails is reported as ERROR at its index and the block
// goes on being stored here; the last packet finalizes the replica before
// it is acknowledged; the sync flag syncs before acknowledging.
// BLOCK_CHECKSUM answers the MD5 of the chunk CRCs; TRANSFER_BLOCK sends a
// replica to other DataNodes; COPY_BLOCK and REPLACE_BLOCK move a replica
// for the balancer. Block tokens are checked by an injected
// Verifier (blocktoken.Manager); a refusal is ERROR_ACCESS_TOKEN.
//
// Every read and write of a connection has a deadline (Config.Timeout), so
// a silent or stalled peer loses its op; a connection over MaxConns is
// closed at once; a peer sending garbage or lying lengths gets an error and
// its connection closed, and no other connection notices.
//
// # Client
//
// Client.ReadBlock verifies every chunk before returning its bytes; a bad
// one ends the read with a *ReadError naming the DataNode, the block and
// the offset. Client.WriteBlock returns a BlockWriter that cuts bytes into
// packets of HDFS's default size (64 KiB with header and checksums), keeps
// at most MaxInFlight packets unacknowledged, offers Flush (hflush), Sync
// (hsync) and Close (the empty last packet), and reports a failure as a
// *PipelineError with the index of the DataNode at fault, for the caller's
// pipeline recovery. BlockChecksum, TransferBlock and ReplaceBlock are the
// other ops;
// SendReplica is how a DataNode copies a replica to others.
package dataxfer
