package nimbus.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractSetTimesTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's AbstractContractSetTimesTest against webhdfs://${nimbus.webhdfs}. */
public class TestNimbusContractSetTimes extends AbstractContractSetTimesTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new NimbusWebHdfsContract(conf);
  }
}
