package nimbus.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractConcatTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's AbstractContractConcatTest against webhdfs://${nimbus.webhdfs}. */
public class TestNimbusContractConcat extends AbstractContractConcatTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new NimbusWebHdfsContract(conf);
  }
}
