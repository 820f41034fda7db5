package nimbus.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractOpenTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;
import org.junit.Test;

/** Hadoop's AbstractContractOpenTest against webhdfs://${nimbus.webhdfs}. */
public class TestNimbusContractOpen extends AbstractContractOpenTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new NimbusWebHdfsContract(conf);
  }

  @Override
  @Test
  public void testOpenReadDir() throws Throwable {
    if (!WebHdfsClientLimits.runAnyway()) {
      WebHdfsClientLimits.skip("WebHdfsFileSystem.open() is lazy, so opening a directory succeeds");
    }
    super.testOpenReadDir();
  }

  @Override
  @Test
  public void testOpenReadDirWithChild() throws Throwable {
    if (!WebHdfsClientLimits.runAnyway()) {
      WebHdfsClientLimits.skip("WebHdfsFileSystem.open() is lazy, so opening a directory succeeds");
    }
    super.testOpenReadDirWithChild();
  }
}
