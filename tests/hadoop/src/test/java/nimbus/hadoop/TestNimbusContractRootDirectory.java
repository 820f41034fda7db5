package nimbus.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractRootDirectoryTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's AbstractContractRootDirectoryTest against webhdfs://${nimbus.webhdfs}. */
public class TestNimbusContractRootDirectory extends AbstractContractRootDirectoryTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new NimbusWebHdfsContract(conf);
  }
}
