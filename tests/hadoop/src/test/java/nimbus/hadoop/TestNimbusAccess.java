package nimbus.hadoop;

import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.List;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.AclEntry;
import org.apache.hadoop.fs.permission.AclEntryScope;
import org.apache.hadoop.fs.permission.AclEntryType;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.server.namenode.NimbusBoundNameNode;
import org.apache.hadoop.security.AccessControlException;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;

/**
 * FileSystem.access (WebHDFS CHECKACCESS) through Hadoop's client: what FSAclBaseTest's testAccess
 * checks, without the group memberships only its test JVM knows (TestNimbusAcl skips it for that).
 * Written for this binding: owner, other, a named user's ACL entry under its mask, search on the
 * ancestors, the superuser (the user running the tests, who started the server), a missing path.
 */
public class TestNimbusAccess {
  private static final UserGroupInformation OTHER =
      UserGroupInformation.createUserForTesting("access-other", new String[] {"access-group"});

  private FileSystem fs;
  private FileSystem other;
  private Path base;

  @Before
  public void setUp() throws Exception {
    fs = NimbusBoundNameNode.fileSystem();
    other = NimbusBoundNameNode.fileSystemAs(OTHER);
    base = new Path("/nimbus-access-bound." + System.nanoTime());
    assertTrue(fs.mkdirs(base));
    fs.setPermission(base, new FsPermission((short) 0755));
  }

  @After
  public void tearDown() throws IOException {
    fs.delete(base, true);
    other.close();
    fs.close();
  }

  @Test
  public void testAccess() throws Exception {
    Path f = new Path(base, "f");
    try (FSDataOutputStream out = fs.create(f)) {
      out.write(1);
    }
    fs.setPermission(f, new FsPermission((short) 0640));
    fs.access(f, FsAction.ALL); // the superuser
    other.access(f, FsAction.NONE); // it exists and its parent is searchable
    assertThrows(AccessControlException.class, () -> other.access(f, FsAction.READ));

    fs.modifyAclEntries(f, List.of(new AclEntry.Builder().setScope(AclEntryScope.ACCESS)
        .setType(AclEntryType.USER).setName(OTHER.getShortUserName()).setPermission(FsAction.READ_WRITE)
        .build()));
    other.access(f, FsAction.READ_WRITE);
    fs.setPermission(f, new FsPermission((short) 0640)); // the mask becomes r--
    other.access(f, FsAction.READ);
    assertThrows(AccessControlException.class, () -> other.access(f, FsAction.WRITE));

    fs.setPermission(base, new FsPermission((short) 0750));
    assertThrows(AccessControlException.class, () -> other.access(f, FsAction.NONE));
    assertThrows(FileNotFoundException.class, () -> fs.access(new Path(base, "missing"), FsAction.READ));
  }
}
