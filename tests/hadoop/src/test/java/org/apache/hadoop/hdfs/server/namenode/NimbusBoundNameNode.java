package org.apache.hadoop.hdfs.server.namenode;

import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyInt;
import static org.mockito.ArgumentMatchers.anyString;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import java.io.IOException;
import java.net.URI;
import java.security.PrivilegedExceptionAction;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.AclEntry;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * Binds Hadoop's FSAclBaseTest / FSXAttrBaseTest (hadoop-hdfs test-jar) to an external
 * webhdfs://${nimbus.webhdfs} instead of their in-JVM MiniDFSCluster.
 *
 * Most of their cases only talk to {@code fs}; the ACL cases end with assertAclFeature, which looks
 * at the NameNode's INode through cluster.getNamesystem().getFSDirectory().getINode(path). That one
 * question ("does this inode carry an ACL feature?") is answered here from the server itself: the
 * stand-in cluster's getINode returns an INode whose AclFeature holds the entries GETACLSTATUS
 * reports, or null when it reports none — which is what HDFS stores (the feature exists exactly when
 * the ACL has entries beyond the permission bits). Lives in this package for AclFeature's int[] form.
 */
public final class NimbusBoundNameNode {
  private NimbusBoundNameNode() {
  }

  public static URI uri() {
    return URI.create("webhdfs://" + System.getProperty("nimbus.webhdfs", "127.0.0.1:9870"));
  }

  public static Configuration conf() {
    Configuration c = new Configuration();
    // Fail fast as the contract binding does (nimbus-webhdfs.xml): no retry storms on an error.
    c.setBoolean("dfs.http.client.retry.policy.enabled", false);
    c.setInt("dfs.http.client.retry.max.attempts", 2);
    c.setInt("dfs.http.client.failover.max.attempts", 1);
    return c;
  }

  /** A FileSystem on the server, as the current user. */
  public static FileSystem fileSystem() throws IOException {
    return FileSystem.newInstance(uri(), conf());
  }

  /** A FileSystem on the server as {@code user} (simple auth: WebHDFS sends user.name). */
  public static FileSystem fileSystemAs(UserGroupInformation user) throws Exception {
    return user.doAs((PrivilegedExceptionAction<FileSystem>) NimbusBoundNameNode::fileSystem);
  }

  /**
   * The base tests name their paths /p1, /p2, ... (and /pN-rename) from a static counter that
   * restarts in every JVM; remove what a previous run left there so that each case starts from
   * nothing. Only those names, directly under /, are touched.
   */
  public static void removeTestPaths() throws IOException {
    try (FileSystem fs = fileSystem()) {
      for (FileStatus st : fs.listStatus(new Path("/"))) {
        if (TEST_PATH.matcher(st.getPath().getName()).matches()) {
          fs.delete(st.getPath(), true);
        }
      }
    }
  }

  private static final Pattern TEST_PATH = Pattern.compile("p[0-9]+(-rename)?");

  /**
   * A MiniDFSCluster stand-in whose only working parts are getNamesystem().getFSDirectory().getINode
   * and getConfiguration.
   */
  public static MiniDFSCluster clusterStandIn() throws Exception {
    MiniDFSCluster cluster = mock(MiniDFSCluster.class);
    FSNamesystem ns = mock(FSNamesystem.class);
    FSDirectory dir = mock(FSDirectory.class);
    when(cluster.getNamesystem()).thenReturn(ns);
    // Cases read client settings (io.file.buffer.size) from the cluster's configuration.
    when(cluster.getConfiguration(anyInt())).thenReturn(conf());
    when(ns.getFSDirectory()).thenReturn(dir);
    when(dir.getINode(anyString(), any())).thenAnswer(inv -> inodeOf(inv.getArgument(0)));
    when(dir.getINode(anyString())).thenAnswer(inv -> inodeOf(inv.getArgument(0)));
    return cluster;
  }

  private static INode inodeOf(String path) throws IOException {
    List<AclEntry> entries;
    try (FileSystem fs = fileSystem()) {
      entries = fs.getAclStatus(new Path(path)).getEntries();
    }
    INode inode = mock(INode.class);
    AclFeature feature = entries.isEmpty() ? null : new AclFeature(AclEntryStatusFormat.toInt(entries));
    when(inode.getAclFeature()).thenReturn(feature);
    return inode;
  }
}
