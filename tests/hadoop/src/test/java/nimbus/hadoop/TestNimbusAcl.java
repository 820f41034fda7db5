package nimbus.hadoop;

import java.io.IOException;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.server.namenode.FSAclBaseTest;
import org.apache.hadoop.hdfs.server.namenode.NimbusBoundNameNode;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * Hadoop's FSAclBaseTest (hadoop-hdfs 3.4.1 test-jar) against webhdfs://${nimbus.webhdfs}. Cases
 * that need the MiniDFSCluster itself or the NameNode's group mapping are overridden below and
 * reported as skipped with the reason (docs/HADOOP.md lists them).
 */
public class TestNimbusAcl extends FSAclBaseTest {
  /** Shadows the subclasses' cluster start: the server is external. */
  @BeforeClass
  public static void init() throws Exception {
    NimbusBoundNameNode.removeTestPaths();
    cluster = NimbusBoundNameNode.clusterStandIn();
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
  public void testRemoveDefaultAcl() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restartCluster) to check the ACL survives it");
    super.testRemoveDefaultAcl();
  }

  @Override
  @Test
  public void testRemoveDefaultAclOnlyAccess() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restartCluster)");
    super.testRemoveDefaultAclOnlyAccess();
  }

  @Override
  @Test
  public void testRemoveDefaultAclOnlyDefault() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restartCluster)");
    super.testRemoveDefaultAclOnlyDefault();
  }

  @Override
  @Test
  public void testRemoveDefaultAclMinimal() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restartCluster)");
    super.testRemoveDefaultAclMinimal();
  }

  @Override
  @Test
  public void testRemoveDefaultAclStickyBit() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode (restartCluster)");
    super.testRemoveDefaultAclStickyBit();
  }

  @Override
  @Test
  public void testSkipAclEnforcementPermsDisabled() throws Exception {
    BoundSuiteLimits.needsCluster("restarts the NameNode with dfs.permissions.enabled=false");
    super.testSkipAclEnforcementPermsDisabled();
  }

  @Override
  @Test
  public void testDeDuplication() throws Exception {
    BoundSuiteLimits.needsCluster("counts the NameNode's in-memory AclStorage reference counts, restarts it");
    super.testDeDuplication();
  }

  @Override
  @Test
  public void testSetPermissionCannotSetAclBit() throws IOException {
    BoundSuiteLimits.needsCluster("reads the permission of the NameNode's INode (INode.getFsPermission) directly");
    super.testSetPermissionCannotSetAclBit();
  }

  @Override
  @Test
  public void testUMaskDefaultAclNewFile() throws Exception {
    BoundSuiteLimits.needsCluster("switches the NameNode's dfs.namenode.posix.acl.inheritance.enabled in-process (FSDirectory.setPosixAclInheritanceEnabled)");
    super.testUMaskDefaultAclNewFile();
  }

  @Override
  @Test
  public void testUMaskDefaultAclNewDir() throws Exception {
    BoundSuiteLimits.needsCluster("switches the NameNode's dfs.namenode.posix.acl.inheritance.enabled in-process (FSDirectory.setPosixAclInheritanceEnabled)");
    super.testUMaskDefaultAclNewDir();
  }

  @Override
  @Test
  public void testDefaultAclNewSymlinkIntermediate() throws Exception {
    BoundSuiteLimits.needsCluster("creates a symlink: FileSystem.enableSymlinks() is off in a client JVM and HDFS answers 'Symlinks not supported'");
    super.testDefaultAclNewSymlinkIntermediate();
  }

  @Override
  @Test
  public void testSetAclMustBeOwnerOrSuper() throws Exception {
    BoundSuiteLimits.needsCluster("user 'super' is a superuser only through group 'supergroup', which the test JVM's UGI knows and an external NameNode does not");
    super.testSetAclMustBeOwnerOrSuper();
  }

  @Override
  @Test
  public void testModifyAclEntriesMustBeOwnerOrSuper() throws Exception {
    BoundSuiteLimits.needsCluster("user 'super' is a superuser only through group 'supergroup', which the test JVM's UGI knows and an external NameNode does not");
    super.testModifyAclEntriesMustBeOwnerOrSuper();
  }

  @Override
  @Test
  public void testRemoveAclEntriesMustBeOwnerOrSuper() throws Exception {
    BoundSuiteLimits.needsCluster("user 'super' is a superuser only through group 'supergroup', which the test JVM's UGI knows and an external NameNode does not");
    super.testRemoveAclEntriesMustBeOwnerOrSuper();
  }

  @Override
  @Test
  public void testRemoveDefaultAclMustBeOwnerOrSuper() throws Exception {
    BoundSuiteLimits.needsCluster("user 'super' is a superuser only through group 'supergroup', which the test JVM's UGI knows and an external NameNode does not");
    super.testRemoveDefaultAclMustBeOwnerOrSuper();
  }

  @Override
  @Test
  public void testRemoveAclMustBeOwnerOrSuper() throws Exception {
    BoundSuiteLimits.needsCluster("user 'super' is a superuser only through group 'supergroup', which the test JVM's UGI knows and an external NameNode does not");
    super.testRemoveAclMustBeOwnerOrSuper();
  }

  @Override
  @Test
  public void testGetAclStatusRequiresTraverseOrSuper() throws Exception {
    BoundSuiteLimits.needsCluster("user 'super' is a superuser only through group 'supergroup', which the test JVM's UGI knows and an external NameNode does not");
    super.testGetAclStatusRequiresTraverseOrSuper();
  }

  @Override
  @Test
  public void testAccess() throws IOException, InterruptedException {
    BoundSuiteLimits.needsCluster("user 'bob' is in groups groupY/groupZ only in the test JVM's UGI (CHECKACCESS itself: TestNimbusAccess)");
    super.testAccess();
  }

  @Override
  @Test
  public void testEffectiveAccess() throws Exception {
    BoundSuiteLimits.needsCluster("user 'bob' is in groups groupY/groupZ only in the test JVM's UGI (CHECKACCESS itself: TestNimbusAccess)");
    super.testEffectiveAccess();
  }
}
