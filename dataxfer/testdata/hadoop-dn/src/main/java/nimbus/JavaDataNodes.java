package nimbus;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.EnumSet;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.crypto.CryptoProtocolVersion;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.ClientProtocol;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.HdfsFileStatus;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.io.EnumSetWritable;

/**
 * Three of Hadoop 3.4.1's own DataNodes (a MiniDFSCluster) for Nimbus's
 * dataxfer client: a file written by Hadoop for the client to read, and a
 * block allocated for the client to write, which Hadoop then reads back.
 *
 * Usage: JavaDataNodes BASEDIR FILE_A FILE_B. Protocol on stdout/stdin:
 * prints "READ pool id gs len addr..." for /a (holding FILE_A's bytes) and
 * "WRITE pool id gs addr..." for /b's first block; waits for "WROTE len";
 * completes /b, compares it with FILE_B and prints "OK" or "FAIL why";
 * then prints "WRITE ..." for /c's first block, waits for "KILL addr",
 * stops that DataNode, prints "KILLED" and waits for a last line.
 */
public class JavaDataNodes {
  static String addrs(DatanodeInfo[] dns) {
    StringBuilder b = new StringBuilder();
    for (DatanodeInfo d : dns) {
      b.append(' ').append(d.getXferAddr());
    }
    return b.toString();
  }

  public static void main(String[] args) throws Exception {
    Configuration conf = new HdfsConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, args[0]);
    conf.setBoolean("dfs.permissions.enabled", false);
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(3).build();
    try {
      cluster.waitActive();
      DistributedFileSystem fs = cluster.getFileSystem();
      byte[] a = Files.readAllBytes(Paths.get(args[1]));
      byte[] b = Files.readAllBytes(Paths.get(args[2]));
      try (FSDataOutputStream out = fs.create(new Path("/a"), (short) 3)) {
        out.write(a);
      }
      LocatedBlock la = fs.getClient().getLocatedBlocks("/a", 0).get(0);
      ExtendedBlock ea = la.getBlock();
      System.out.println("READ " + ea.getBlockPoolId() + " " + ea.getBlockId() + " " + ea.getGenerationStamp() + " "
          + ea.getNumBytes() + addrs(la.getLocations()));

      ClientProtocol nn = fs.getClient().getNamenode();
      String client = fs.getClient().getClientName();
      HdfsFileStatus st = nn.create("/b", FsPermission.getFileDefault(), client,
          new EnumSetWritable<>(EnumSet.of(CreateFlag.CREATE)), true, (short) 3, 128L << 20, CryptoProtocolVersion.supported(), null, null);
      LocatedBlock lb = nn.addBlock("/b", client, null, null, st.getFileId(), null, null);
      ExtendedBlock eb = lb.getBlock();
      System.out.println("WRITE " + eb.getBlockPoolId() + " " + eb.getBlockId() + " " + eb.getGenerationStamp()
          + addrs(lb.getLocations()));
      System.out.flush();

      BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
      String line = in.readLine();
      if (line == null || !line.startsWith("WROTE ")) {
        System.out.println("FAIL no WROTE line: " + line);
        return;
      }
      eb.setNumBytes(Long.parseLong(line.substring(6).trim()));
      boolean done = false;
      for (int i = 0; i < 100 && !done; i++) {
        done = nn.complete("/b", client, eb, st.getFileId());
        if (!done) {
          Thread.sleep(100);
        }
      }
      if (!done) {
        System.out.println("FAIL complete /b never succeeded");
        return;
      }
      byte[] got = new byte[b.length];
      try (FSDataInputStream is = fs.open(new Path("/b"))) {
        is.readFully(0, got);
      }
      long len = fs.getFileStatus(new Path("/b")).getLen();
      if (len != b.length || !Arrays.equals(got, b)) {
        System.out.println("FAIL /b as Hadoop reads it differs from what was written (length " + len + ")");
        return;
      }
      System.out.println("OK");
      System.out.flush();

      // A pipeline that loses a DataNode: /c's first block; the client
      // names the DataNode to stop.
      HdfsFileStatus sc = nn.create("/c", FsPermission.getFileDefault(), client,
          new EnumSetWritable<>(EnumSet.of(CreateFlag.CREATE)), true, (short) 3, 128L << 20,
          CryptoProtocolVersion.supported(), null, null);
      LocatedBlock lc = nn.addBlock("/c", client, null, null, sc.getFileId(), null, null);
      ExtendedBlock ec = lc.getBlock();
      System.out.println("WRITE " + ec.getBlockPoolId() + " " + ec.getBlockId() + " " + ec.getGenerationStamp()
          + addrs(lc.getLocations()));
      System.out.flush();
      line = in.readLine();
      if (line == null || !line.startsWith("KILL ")) {
        System.out.println("FAIL no KILL line: " + line);
        return;
      }
      String victim = line.substring(5).trim();
      boolean stopped = false;
      for (int i = 0; i < cluster.getDataNodes().size() && !stopped; i++) {
        if (cluster.getDataNodes().get(i).getDatanodeId().getXferAddr().equals(victim)) {
          cluster.stopDataNode(i);
          stopped = true;
        }
      }
      System.out.println(stopped ? "KILLED" : "FAIL no DataNode at " + victim);
      System.out.flush();
      in.readLine(); // the client is done
    } finally {
      cluster.shutdown();
    }
  }
}
