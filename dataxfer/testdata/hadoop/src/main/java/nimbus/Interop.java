package nimbus;

import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.channels.SocketChannel;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.Random;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.BlockReader;
import org.apache.hadoop.hdfs.client.impl.BlockReaderRemote;
import org.apache.hadoop.hdfs.net.NioInetPeer;
import org.apache.hadoop.hdfs.protocol.BlockChecksumOptions;
import org.apache.hadoop.hdfs.protocol.BlockChecksumType;
import org.apache.hadoop.hdfs.protocol.DatanodeID;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.datatransfer.BlockConstructionStage;
import org.apache.hadoop.hdfs.protocol.datatransfer.PacketHeader;
import org.apache.hadoop.hdfs.protocol.datatransfer.PipelineAck;
import org.apache.hadoop.hdfs.protocol.datatransfer.Sender;
import org.apache.hadoop.hdfs.protocol.proto.DataTransferProtos.BlockOpResponseProto;
import org.apache.hadoop.hdfs.protocol.proto.DataTransferProtos.Status;
import org.apache.hadoop.hdfs.protocolPB.PBHelperClient;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.server.datanode.CachingStrategy;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.util.DataChecksum;

/**
 * Hadoop 3.4.1's own DataTransferProtocol classes against Nimbus DataNodes:
 * a block written through a pipeline of the given DataNodes with Sender,
 * PacketHeader and PipelineAck as DataStreamer uses them (a heartbeat and an
 * hsync packet among the data), read back from every DataNode with
 * BlockReaderRemote (whole and a range, checksums verified), and its
 * BLOCK_CHECKSUM compared with the MD5 of the CRC32C computed here.
 *
 * Usage: Interop POOL BLOCKID SIZE ADDR...  Prints OK and exits 0, or the
 * failure and exits 1.
 */
public class Interop {
  static void check(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static DatanodeInfo node(String addr, int i) {
    String[] hp = addr.split(":");
    return new DatanodeInfo.DatanodeInfoBuilder()
        .setNodeID(new DatanodeID(hp[0], hp[0], "dn-" + i, Integer.parseInt(hp[1]), 0, 0, 0))
        .build();
  }

  public static void main(String[] args) throws Exception {
    String pool = args[0];
    long blockId = Long.parseLong(args[1]);
    int size = Integer.parseInt(args[2]);
    DatanodeInfo[] nodes = new DatanodeInfo[args.length - 3];
    StorageType[] types = new StorageType[nodes.length];
    String[] ids = new String[nodes.length];
    for (int i = 0; i < nodes.length; i++) {
      nodes[i] = node(args[3 + i], i);
      types[i] = StorageType.DISK;
      ids[i] = "DS-" + i;
    }
    byte[] data = new byte[size];
    new Random(blockId).nextBytes(data);
    ExtendedBlock block = new ExtendedBlock(pool, blockId, 0, 1001);
    Token<BlockTokenIdentifier> token = new Token<>();
    DataChecksum sum = DataChecksum.newDataChecksum(DataChecksum.Type.CRC32C, 512);
    try {
      write(block, token, nodes, types, ids, sum, data);
      block.setNumBytes(size);
      for (DatanodeInfo dn : nodes) {
        check(Arrays.equals(read(block, token, dn, 0, size), data), "whole block read from " + dn.getXferAddr());
        int off = Math.min(1000, size), len = Math.min(70000, size - off);
        check(Arrays.equals(read(block, token, dn, off, len), Arrays.copyOfRange(data, off, off + len)),
            "range read from " + dn.getXferAddr());
        checksum(block, token, dn, sum, data);
      }
    } catch (Throwable t) {
      System.out.println("FAIL: " + t);
      t.printStackTrace(System.out);
      System.exit(1);
    }
    System.out.println("OK");
  }

  static Socket connect(DatanodeInfo dn) throws IOException {
    Socket s = SocketChannel.open().socket(); // NioInetPeer needs a channel, as DFSClient's sockets have
    s.connect(new InetSocketAddress(dn.getIpAddr(), dn.getXferPort()), 60000);
    s.setSoTimeout(60000);
    return s;
  }

  static void write(ExtendedBlock block, Token<BlockTokenIdentifier> token, DatanodeInfo[] nodes,
      StorageType[] types, String[] ids, DataChecksum sum, byte[] data) throws Exception {
    try (Socket s = connect(nodes[0])) {
      DataOutputStream out = new DataOutputStream(new BufferedOutputStream(s.getOutputStream(), 128 << 10));
      DataInputStream in = new DataInputStream(s.getInputStream());
      // As DataStreamer.createBlockOutputStream: the whole pipeline as
      // targets (Sender sends all but the first).
      new Sender(out).writeBlock(block, types[0], token, "DFSClient_interop", nodes, types, null,
          BlockConstructionStage.PIPELINE_SETUP_CREATE, nodes.length, 0, 0, block.getGenerationStamp(),
          sum, CachingStrategy.newDefaultStrategy(), false, false, null, ids[0], ids);
      out.flush();
      BlockOpResponseProto resp = BlockOpResponseProto.parseFrom(PBHelperClient.vintPrefixed(in));
      check(resp.getStatus() == Status.SUCCESS, "pipeline setup: " + resp);
      check(resp.getFirstBadLink().isEmpty(), "firstBadLink " + resp.getFirstBadLink());

      int chunk = 126 * 512; // DFSOutputStream's packet of 64 KiB
      long seq = 0;
      int packets = 0;
      for (int off = 0; off < data.length; off += chunk, packets++) {
        int len = Math.min(chunk, data.length - off);
        byte[] sums = new byte[sum.getChecksumSize() * ((len + 511) / 512)];
        sum.calculateChunkedSums(data, off, len, sums, 0);
        boolean sync = packets == 2;
        new PacketHeader(4 + sums.length + len, off, seq, false, len, sync).write(out);
        out.write(sums);
        out.write(data, off, len);
        out.flush();
        expectAck(in, seq++, nodes.length);
        if (packets == 1) {
          // A heartbeat (DFSPacket.HEART_BEAT_SEQNO) between data packets.
          new PacketHeader(4, 0, -1, false, 0, false).write(out);
          out.flush();
          expectAck(in, -1, nodes.length);
        }
      }
      new PacketHeader(4, data.length, seq, true, 0, false).write(out);
      out.flush();
      expectAck(in, seq, nodes.length);
    }
  }

  static void expectAck(DataInputStream in, long seq, int n) throws IOException {
    PipelineAck ack = new PipelineAck();
    ack.readFields(in);
    check(ack.getSeqno() == seq, "ack seqno " + ack.getSeqno() + ", want " + seq);
    check(ack.getNumOfReplies() == n, "ack of " + ack.getNumOfReplies() + " DataNodes, want " + n);
    for (int i = 0; i < n; i++) {
      int flag = ack.getHeaderFlag(i);
      check(PipelineAck.getStatusFromHeader(flag) == Status.SUCCESS, "ack status " + i + ": " + ack);
      check(PipelineAck.getECNFromHeader(flag) == PipelineAck.ECN.DISABLED, "ECN bits in " + ack);
    }
  }

  static byte[] read(ExtendedBlock block, Token<BlockTokenIdentifier> token, DatanodeInfo dn, long off, int len)
      throws IOException {
    Socket s = connect(dn);
    BlockReader r = BlockReaderRemote.newBlockReader("/interop", block, token, off, len, true,
        "DFSClient_interop", new NioInetPeer(s), dn, null, CachingStrategy.newDefaultStrategy(), 0,
        new Configuration());
    byte[] got = new byte[len];
    r.readFully(got, 0, len);
    r.close(); // after the trailing empty packet: sends CHECKSUM_OK
    return got;
  }

  static void checksum(ExtendedBlock block, Token<BlockTokenIdentifier> token, DatanodeInfo dn, DataChecksum sum,
      byte[] data) throws Exception {
    try (Socket s = connect(dn)) {
      DataOutputStream out = new DataOutputStream(s.getOutputStream());
      new Sender(out).blockChecksum(block, token, new BlockChecksumOptions(BlockChecksumType.MD5CRC));
      out.flush();
      BlockOpResponseProto resp = BlockOpResponseProto.parseFrom(
          PBHelperClient.vintPrefixed(new DataInputStream(s.getInputStream())));
      check(resp.getStatus() == Status.SUCCESS, "BLOCK_CHECKSUM: " + resp);
      byte[] sums = new byte[sum.getChecksumSize() * ((data.length + 511) / 512)];
      sum.calculateChunkedSums(data, 0, data.length, sums, 0);
      byte[] want = MessageDigest.getInstance("MD5").digest(sums);
      check(Arrays.equals(resp.getChecksumResponse().getBlockChecksum().toByteArray(), want),
          "block MD5 from " + dn.getXferAddr());
      check(resp.getChecksumResponse().getCrcPerBlock() == (data.length + 511) / 512, "crcPerBlock");
    }
  }
}
