package nimbus.hadoop;

import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.server.namenode.FSXAttrBaseTest;
import org.apache.hadoop.hdfs.server.namenode.NimbusBoundNameNode;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * Hadoop's FSXAttrBaseTest (hadoop-hdfs 3.4.1 test-jar) against webhdfs://${nimbus.webhdfs}. Cases
 * that need the MiniDFSCluster itself or its configuration are overridden below and reported as
 * skipped with the reason (docs/HADOOP.md lists them).
 */
public class TestNimbusXAttr extends FSXAttrBaseTest {
  /** Shadows FSXAttrBaseTest.init, which starts a MiniDFSCluster: the server is external. */
  @BeforeClass
  public static void init() throws Exception {
    NimbusBoundNameNode.removeTestPaths();
  }

  @Override
  protected FileSystem createFileSystem() throws Exception {
    return NimbusBoundNameNode.fileSystem();
  }

  @Override
  protected FileSystem createFileSystem(UserGroupInformation user) throws Exception {
    return NimbusBoundNameNode.fileSystemAs(user);
  }

  @Override
  @Test
  public void testCreateXAttr() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restart(), with and without a checkpoint)");
    super.testCreateXAttr();
  }

  @Override
  @Test
  public void testReplaceXAttr() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restart())");
    super.testReplaceXAttr();
  }

  @Override
  @Test
  public void testRemoveXAttr() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restart())");
    super.testRemoveXAttr();
  }

  @Override
  @Test
  public void testCleanupXAttrs() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restart())");
    super.testCleanupXAttrs();
  }

  @Override
  @Test
  public void testSetXAttr() throws Exception {
    BoundSuiteLimits.needsCluster("needs the NameNode started with max-xattrs-per-inode=3 and max-xattr-size=16 (FSXAttrBaseTest.init)");
    super.testSetXAttr();
  }

  @Override
  @Test
  public void testGetXAttrs() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user (dfsCluster.getFileSystem())");
    super.testGetXAttrs();
  }

  @Override
  @Test
  public void testRemoveXAttrPermissions() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user (dfsCluster.getFileSystem())");
    super.testRemoveXAttrPermissions();
  }

  @Override
  @Test
  public void testListXAttrs() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user (dfsCluster.getFileSystem())");
    super.testListXAttrs();
  }

  @Override
  @Test
  public void testRawXAttrs() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user (raw.* xattrs through /.reserved/raw are covered by namespace TestReservedRaw and webhdfs TestReservedRawOverHTTP)");
    super.testRawXAttrs();
  }

  @Override
  @Test
  public void testUnreadableBySuperuserXAttr() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user");
    super.testUnreadableBySuperuserXAttr();
  }
}
