package nimbus.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractSeekTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;
import org.junit.Test;

/** Hadoop's AbstractContractSeekTest against webhdfs://${nimbus.webhdfs}. */
public class TestNimbusContractSeek extends AbstractContractSeekTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new NimbusWebHdfsContract(conf);
  }

  @Override
  @Test
  public void testNegativeSeek() throws Throwable {
    if (!WebHdfsClientLimits.runAnyway()) {
      WebHdfsClientLimits.skip("the client's OffsetParam throws IllegalArgumentException for -1, "
          + "before any request is sent");
    }
    super.testNegativeSeek();
  }

  @Override
  @Test
  public void testSeekReadClosedFile() throws Throwable {
    if (!WebHdfsClientLimits.runAnyway()) {
      WebHdfsClientLimits.skip("WebHdfsInputStream.seek() does not check that the stream is open");
    }
    super.testSeekReadClosedFile();
  }

  @Override
  @Test
  public void testSeekPastEndOfFileThenReseekAndRead() throws Throwable {
    if (!WebHdfsClientLimits.runAnyway()) {
      WebHdfsClientLimits.skip("WebHdfsInputStream.seek() past EOF is lazy; the next read fails "
          + "with 'Premature EOF' instead of the seek");
    }
    super.testSeekPastEndOfFileThenReseekAndRead();
  }
}
