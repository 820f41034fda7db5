package nimbus.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractAppendTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's AbstractContractAppendTest against webhdfs://${nimbus.webhdfs}. */
public class TestNimbusContractAppend extends AbstractContractAppendTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new NimbusWebHdfsContract(conf);
  }
}
