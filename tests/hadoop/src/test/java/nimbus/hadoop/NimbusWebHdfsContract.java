package nimbus.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractBondedFSContract;

/**
 * Hadoop's FileSystem contract bound to an external WebHDFS endpoint (Nimbus's, or HDFS's own for
 * checking the harness). The endpoint comes from the system property {@code nimbus.webhdfs}
 * (HOST:PORT or webhdfs://HOST:PORT); the contract options from contract/nimbus-webhdfs.xml.
 */
public class NimbusWebHdfsContract extends AbstractBondedFSContract {
  public static final String OPTIONS = "contract/nimbus-webhdfs.xml";
  public static final String ENDPOINT_PROPERTY = "nimbus.webhdfs";

  public NimbusWebHdfsContract(Configuration conf) {
    super(conf);
    addConfResource(OPTIONS);
    getConf().set("fs.contract.test.fs.webhdfs", endpointUri());
  }

  /** webhdfs://HOST:PORT from -Dnimbus.webhdfs (default 127.0.0.1:9870). */
  public static String endpointUri() {
    String ep = System.getProperty(ENDPOINT_PROPERTY, "127.0.0.1:9870").trim();
    if (ep.isEmpty()) {
      ep = "127.0.0.1:9870";
    }
    if (ep.startsWith("http://")) {
      ep = ep.substring("http://".length());
    }
    if (!ep.startsWith("webhdfs://")) {
      ep = "webhdfs://" + ep;
    }
    while (ep.endsWith("/")) {
      ep = ep.substring(0, ep.length() - 1);
    }
    return ep;
  }

  /** A client configuration: the contract options (retry settings included) and nothing else. */
  public static Configuration clientConf() {
    Configuration conf = new Configuration();
    conf.addResource(OPTIONS);
    return conf;
  }

  @Override
  public String getScheme() {
    return "webhdfs";
  }
}
