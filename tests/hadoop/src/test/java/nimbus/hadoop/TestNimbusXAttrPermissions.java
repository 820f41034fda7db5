package nimbus.hadoop;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.XAttrSetFlag;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.server.namenode.NimbusBoundNameNode;
import org.apache.hadoop.ipc.RemoteException;
import org.apache.hadoop.security.AccessControlException;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;

/**
 * The parts of FSXAttrBaseTest that the bound suite (TestNimbusXAttr) loses to its MiniDFSCluster:
 * the flag rules of testCreateXAttr/testReplaceXAttr without the NameNode restarts, the permission
 * rules of testGetXAttrs/testRemoveXAttrPermissions/testListXAttrs with a WebHDFS FileSystem as the
 * other user instead of dfsCluster.getFileSystem(), and the rules of the
 * security.hdfs.unreadable.by.superuser xattr. Written for this binding (not copied), with HDFS's
 * messages; validated against the HDFS peer, where every case passes.
 */
public class TestNimbusXAttrPermissions {
  private static final UserGroupInformation OTHER =
      UserGroupInformation.createUserForTesting("xattr-other", new String[] {"xattr-group"});
  private static final byte[] V1 = {1, 2, 3};
  private static final byte[] V2 = {4, 5};

  private FileSystem fs;
  private FileSystem other;
  private Path base;

  @Before
  public void setUp() throws Exception {
    fs = NimbusBoundNameNode.fileSystem();
    other = NimbusBoundNameNode.fileSystemAs(OTHER);
    base = new Path("/nimbus-xattr-bound." + System.nanoTime());
    assertTrue(fs.mkdirs(base));
    fs.setPermission(base, new FsPermission((short) 0755));
  }

  @After
  public void tearDown() throws IOException {
    fs.delete(base, true);
    other.close();
    fs.close();
  }

  private Path dir(String name, int mode) throws IOException {
    Path p = new Path(base, name);
    assertTrue(fs.mkdirs(p));
    fs.setPermission(p, new FsPermission((short) mode));
    return p;
  }

  private Path file(Path parent, String name, int mode) throws IOException {
    Path p = new Path(parent, name);
    try (FSDataOutputStream out = fs.create(p)) {
      out.write(V1);
    }
    fs.setPermission(p, new FsPermission((short) mode));
    return p;
  }

  private static void assertMessage(String want, Throwable e) {
    assertTrue("message of " + e + " should contain '" + want + "'",
        String.valueOf(e.getMessage()).contains(want));
  }

  @Test
  public void testCreateAndReplaceFlags() throws Exception {
    Path p = dir("flags", 0750);
    fs.setXAttr(p, "user.a1", V1, EnumSet.of(XAttrSetFlag.CREATE));
    IOException e = assertThrows(IOException.class,
        () -> fs.setXAttr(p, "user.a1", V2, EnumSet.of(XAttrSetFlag.CREATE)));
    assertMessage("already exists", e);
    e = assertThrows(IOException.class,
        () -> fs.setXAttr(p, "user.a2", V2, EnumSet.of(XAttrSetFlag.REPLACE)));
    assertMessage("does not exist", e);
    fs.setXAttr(p, "user.a1", V2, EnumSet.of(XAttrSetFlag.REPLACE));
    fs.setXAttr(p, "user.a2", null, EnumSet.of(XAttrSetFlag.CREATE, XAttrSetFlag.REPLACE));
    Map<String, byte[]> all = fs.getXAttrs(p);
    assertEquals(2, all.size());
    assertArrayEquals(V2, all.get("user.a1"));
    assertArrayEquals(new byte[0], all.get("user.a2"));
    fs.removeXAttr(p, "user.a1");
    e = assertThrows(IOException.class, () -> fs.removeXAttr(p, "user.a1"));
    assertMessage("No matching attributes found", e);
    e = assertThrows(IOException.class, () -> fs.getXAttr(p, "user.a1"));
    assertMessage("At least one of the attributes provided was not found", e);
    assertEquals(List.of("user.a2"), fs.listXAttrs(p));
  }

  @Test
  public void testTrustedNamespaceIsSuperuserOnly() throws Exception {
    Path p = dir("trusted", 0777);
    fs.setXAttr(p, "trusted.t", V1);
    fs.setXAttr(p, "user.u", V2);
    IOException e = assertThrows(IOException.class, () -> other.getXAttr(p, "trusted.t"));
    assertMessage("User doesn't have permission for xattr: trusted.t", e);
    e = assertThrows(IOException.class, () -> other.removeXAttr(p, "trusted.t"));
    assertMessage("User doesn't have permission for xattr: trusted.t", e);
    e = assertThrows(IOException.class, () -> other.setXAttr(p, "trusted.x", V1));
    assertMessage("User doesn't have permission for xattr: trusted.x", e);
    // A listing or a get-all as another user leaves the trusted namespace out.
    assertEquals(List.of("user.u"), other.listXAttrs(p));
    assertEquals(1, other.getXAttrs(p).size());
    assertEquals(2, fs.listXAttrs(p).size());
  }

  @Test
  public void testGetNeedsSearchOnParentAndReadOnEntity() throws Exception {
    Path parent = dir("get", 0700);
    Path child = dir("get/child", 0700);
    fs.setXAttr(parent, "user.a", V1);
    fs.setXAttr(child, "user.a", V1);
    assertThrows(AccessControlException.class, () -> other.getXAttr(parent, "user.a"));
    fs.setPermission(parent, new FsPermission((short) 0704)); // read, no search
    assertThrows(AccessControlException.class, () -> other.getXAttr(child, "user.a"));
    fs.setPermission(parent, new FsPermission((short) 0701));
    fs.setPermission(child, new FsPermission((short) 0701)); // search only on the entity
    assertThrows(AccessControlException.class, () -> other.getXAttr(child, "user.a"));
    fs.setPermission(child, new FsPermission((short) 0704));
    assertArrayEquals(V1, other.getXAttr(child, "user.a"));
    assertEquals(List.of("user.a"), other.listXAttrs(child));
  }

  @Test
  public void testListNeedsReadOnEntity() throws Exception {
    dir("list", 0701);
    Path child = dir("list/child", 0701);
    fs.setXAttr(child, "user.secret", V1);
    assertThrows(AccessControlException.class, () -> other.listXAttrs(child));
    fs.setPermission(child, new FsPermission((short) 0704));
    assertEquals(List.of("user.secret"), other.listXAttrs(child));
  }

  @Test
  public void testSetAndRemoveNeedWriteOnEntity() throws Exception {
    Path parent = dir("rm", 0701);
    Path f = file(parent, "f", 0644);
    fs.setXAttr(f, "user.a", V1);
    assertThrows(AccessControlException.class, () -> other.removeXAttr(f, "user.a"));
    assertThrows(AccessControlException.class, () -> other.setXAttr(f, "user.b", V1));
    fs.setPermission(f, new FsPermission((short) 0646));
    other.setXAttr(f, "user.b", V2);
    other.removeXAttr(f, "user.a");
    assertEquals(List.of("user.b"), fs.listXAttrs(f));
  }

  @Test
  public void testMissingPath() throws Exception {
    Path p = new Path(base, "missing");
    assertThrows(FileNotFoundException.class, () -> fs.listXAttrs(p));
    assertThrows(FileNotFoundException.class, () -> fs.getXAttrs(p));
    assertThrows(FileNotFoundException.class, () -> fs.setXAttr(p, "user.a", V1));
  }

  @Test
  public void testBadNames() throws Exception {
    Path p = dir("names", 0755);
    IOException e = assertThrows(IOException.class, () -> fs.setXAttr(p, "a1", V1));
    assertMessage("XAttr name must be prefixed with user/trusted/security/system/raw, followed by a '.'", e);
  }

  @Test
  public void testEmptyNameMessage() throws Exception {
    Path p = dir("empty-name", 0755);
    IOException e = assertThrows(IOException.class, () -> fs.setXAttr(p, "user.", V1));
    assertMessage("XAttr name cannot be empty", e);
  }

  @Test
  public void testBadNamesAreHadoopIllegalArgumentException() throws Exception {
    Path p = dir("names-class", 0755);
    RemoteException e = assertThrows(RemoteException.class, () -> fs.setXAttr(p, "a1", V1));
    assertEquals("org.apache.hadoop.HadoopIllegalArgumentException", e.getClassName());
    e = assertThrows(RemoteException.class, () -> fs.removeXAttr(p, "wackynamespace.foo"));
    assertEquals("org.apache.hadoop.HadoopIllegalArgumentException", e.getClassName());
  }

  @Test
  public void testNamespacePrefixIsCaseInsensitive() throws Exception {
    Path p = dir("case", 0755);
    fs.setXAttr(p, "user.a2", V2);
    assertArrayEquals(V2, fs.getXAttr(p, "USER.a2"));
    fs.setXAttr(p, "User.b", V1);
    assertTrue(fs.listXAttrs(p).contains("user.b"));
  }

  private static final String UNREADABLE = "security.hdfs.unreadable.by.superuser";

  @Test
  public void testUnreadableBySuperuser() throws Exception {
    Path parent = dir("unreadable", 0777);
    Path f = file(parent, "f", 0644);
    IOException e = assertThrows(IOException.class,
        () -> fs.setXAttr(parent, UNREADABLE, null, EnumSet.of(XAttrSetFlag.CREATE)));
    assertMessage("Can only set '" + UNREADABLE + "' on a file", e);
    fs.setXAttr(f, UNREADABLE, null, EnumSet.of(XAttrSetFlag.CREATE));
    fs.setXAttr(f, UNREADABLE, null, EnumSet.of(XAttrSetFlag.CREATE, XAttrSetFlag.REPLACE));
    assertArrayEquals(new byte[0], fs.getXAttr(f, UNREADABLE));
    assertEquals(List.of(UNREADABLE), fs.listXAttrs(f));
    // The superuser cannot read the file; its owner still can.
    assertThrows(AccessControlException.class, () -> fs.open(f).read());
    fs.setOwner(f, OTHER.getShortUserName(), null);
    byte[] got = new byte[V1.length];
    try (var in = other.open(f)) {
      in.readFully(got);
    }
    assertArrayEquals(V1, got);
  }

  @Test
  public void testUnreadableBySuperuserIsPermanent() throws Exception {
    Path f = file(dir("permanent", 0777), "f", 0644);
    fs.setXAttr(f, UNREADABLE, null, EnumSet.of(XAttrSetFlag.CREATE));
    AccessControlException ace = assertThrows(AccessControlException.class, () -> fs.removeXAttr(f, UNREADABLE));
    assertMessage("The xattr '" + UNREADABLE + "' can not be deleted.", ace);
    ace = assertThrows(AccessControlException.class,
        () -> fs.setXAttr(f, UNREADABLE, V1, EnumSet.of(XAttrSetFlag.REPLACE)));
    assertMessage("Values are not allowed", ace);
  }
}
