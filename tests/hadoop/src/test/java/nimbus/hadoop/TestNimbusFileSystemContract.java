package nimbus.hadoop;

import java.net.URI;

import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FileSystemContractBaseTest;
import org.junit.Before;

/** Hadoop's FileSystemContractBaseTest against webhdfs://${nimbus.webhdfs}. */
public class TestNimbusFileSystemContract extends FileSystemContractBaseTest {
  private String defaultWorkingDirectory;

  @Before
  public void setUp() throws Exception {
    fs = FileSystem.newInstance(new URI(NimbusWebHdfsContract.endpointUri()),
        NimbusWebHdfsContract.clientConf());
    defaultWorkingDirectory = fs.getWorkingDirectory().toUri().getPath();
  }

  /** WebHDFS's working directory is the user's home directory on the server (GETHOMEDIRECTORY). */
  @Override
  protected String getDefaultWorkingDirectory() {
    return defaultWorkingDirectory;
  }
}
