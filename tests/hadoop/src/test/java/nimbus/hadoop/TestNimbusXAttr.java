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
    BoundSuiteLimits.needsCluster("needs the NameNode started with max-xattrs-per-inode=3 and max-xattr-size=16 (FSXAttrBaseTest.init); Nimbus also differs before that: a missing xattr.name answers 'Invalid value for webhdfs parameter' where HDFS says 'Required param xattr.name for op: SETXATTR is null or empty'");
    super.testSetXAttr();
  }

  @Override
  @Test
  public void testGetXAttrs() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user (dfsCluster.getFileSystem()); Nimbus also differs before that: it rejects the name 'USER.a2', HDFS takes the namespace prefix case-insensitively");
    super.testGetXAttrs();
  }

  @Override
  @Test
  public void testRemoveXAttrPermissions() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user (dfsCluster.getFileSystem()); Nimbus also differs before that: a name in an unknown namespace answers java.lang.IllegalArgumentException where HDFS answers org.apache.hadoop.HadoopIllegalArgumentException");
    super.testRemoveXAttrPermissions();
  }

  @Override
  @Test
  public void testListXAttrs() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user (dfsCluster.getFileSystem()); Nimbus also differs before that: LISTXATTRS of a missing path says 'File does not exist' where HDFS says 'cannot find <path>' (both FileNotFoundException)");
    super.testListXAttrs();
  }

  @Override
  @Test
  public void testRawXAttrs() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user; Nimbus also has no /.reserved/raw paths (raw.* xattrs)");
    super.testRawXAttrs();
  }

  @Override
  @Test
  public void testUnreadableBySuperuserXAttr() throws Exception {
    BoundSuiteLimits.needsCluster("opens a DistributedFileSystem as another user; Nimbus also differs before that: removing security.hdfs.unreadable.by.superuser succeeds where HDFS refuses it (The xattr ... can not be deleted.)");
    super.testUnreadableBySuperuserXAttr();
  }
}
