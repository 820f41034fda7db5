// RpcBench: a closed-loop load generator against an HDFS NameNode over Hadoop RPC, for the operations
// NNThroughputBenchmark does not have (listing a directory, setPermission) and for stat as a cross-check
// of its fileStatus. Like NNThroughputBenchmark it calls the NameNode's ClientProtocol through one RPC
// proxy shared by all threads (no DFSClient in between), on the paths of an existing tree, so that the
// result sits beside `nimbus bench micro --op ls|chmod|stat` on the same tree.
//
//   java -cp CONF:LIB/* RpcBench NN_URI OP THREADS SECONDS ROOT
//     OP: ls | chmod | stat
//   java -cp CONF:LIB/* RpcBench NN_URI fill THREADS COUNT DIR
//     creates DIR (and its parents) and COUNT empty files in it, named f0000000, f0000001, ..., as
//     NNThroughputBenchmark's create does (create, then complete, no block), so that `nimbus bench
//     bigdir` finds a directory of COUNT entries on HDFS without creating them over WebHDFS, where every
//     create is a redirect to the DataNode (~1,000/s here). Files that exist already are skipped.
//
// Prints one JSON line: {"op":..,"threads":..,"ops_per_s":..,"operations":..,"errors":..,"elapsed_ms":..,
// "p50_ms":..,"p99_ms":..,"tool":"RpcBench","target":..}. Progress and errors go to stderr.
import java.net.URI;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.crypto.CryptoProtocolVersion;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.EnumSetWritable;
import org.apache.hadoop.ipc.RemoteException;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.NameNodeProxies;
import org.apache.hadoop.hdfs.protocol.ClientProtocol;
import org.apache.hadoop.hdfs.protocol.DirectoryListing;
import org.apache.hadoop.hdfs.protocol.HdfsFileStatus;

public class RpcBench {
  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: RpcBench NN_URI ls|chmod|stat THREADS SECONDS ROOT");
      System.exit(2);
    }
    final URI uri = new URI(args[0]);
    final String op = args[1];
    final int threads = Integer.parseInt(args[2]);
    final long seconds = Long.parseLong(args[3]);
    final String root = args[4];
    if (!op.equals("ls") && !op.equals("chmod") && !op.equals("stat") && !op.equals("fill")) {
      System.err.println("RpcBench: unknown op " + op + " (want ls, chmod, stat or fill)");
      System.exit(2);
    }
    HdfsConfiguration conf = new HdfsConfiguration();
    final ClientProtocol nn = NameNodeProxies.createProxy(conf, uri, ClientProtocol.class).getProxy();
    if (op.equals("fill")) {
      fill(nn, uri, threads, seconds, root);
      System.exit(0);
    }

    // The tree's directories and files, by listing it (not timed).
    final List<String> dirs = new ArrayList<>();
    final List<String> files = new ArrayList<>();
    List<String> todo = new ArrayList<>();
    todo.add(root);
    while (!todo.isEmpty()) {
      String d = todo.remove(todo.size() - 1);
      dirs.add(d);
      byte[] after = HdfsFileStatus.EMPTY_NAME;
      while (true) {
        DirectoryListing l = nn.getListing(d, after, false);
        if (l == null) {
          throw new IllegalStateException("RpcBench: " + d + " does not exist");
        }
        for (HdfsFileStatus st : l.getPartialListing()) {
          String p = d.endsWith("/") ? d + st.getLocalName() : d + "/" + st.getLocalName();
          if (st.isDirectory()) {
            todo.add(p);
          } else {
            files.add(p);
          }
        }
        if (!l.hasMore()) {
          break;
        }
        after = l.getLastName();
      }
    }
    if (files.isEmpty() && !op.equals("ls")) {
      throw new IllegalStateException("RpcBench: no files under " + root);
    }
    System.err.printf("RpcBench: %s has %d directories and %d files; %s with %d threads for %d s%n",
        root, dirs.size(), files.size(), op, threads, seconds);

    final AtomicLong errors = new AtomicLong();
    final long[][] lat = new long[threads][];
    final int[] count = new int[threads];
    final long start = System.nanoTime();
    final long deadline = start + seconds * 1_000_000_000L;
    Thread[] ts = new Thread[threads];
    for (int i = 0; i < threads; i++) {
      final int id = i;
      ts[i] = new Thread(() -> {
        Random rng = new Random(1000 + id);
        long[] l = new long[1 << 16];
        int n = 0;
        boolean flip = false;
        FsPermission a = new FsPermission((short) 0640), b = new FsPermission((short) 0644);
        while (true) {
          long t0 = System.nanoTime();
          if (t0 >= deadline) {
            break;
          }
          try {
            switch (op) {
              case "ls":
                nn.getListing(dirs.get(rng.nextInt(dirs.size())), HdfsFileStatus.EMPTY_NAME, false);
                break;
              case "chmod":
                flip = !flip;
                nn.setPermission(files.get(rng.nextInt(files.size())), flip ? a : b);
                break;
              default:
                nn.getFileInfo(files.get(rng.nextInt(files.size())));
            }
          } catch (Exception e) {
            if (errors.incrementAndGet() <= 3) {
              System.err.println("RpcBench: " + op + ": " + e);
            }
          }
          if (n == l.length) {
            l = Arrays.copyOf(l, l.length * 2);
          }
          l[n++] = System.nanoTime() - t0;
        }
        lat[id] = l;
        count[id] = n;
      });
      ts[i].start();
    }
    for (Thread t : ts) {
      t.join();
    }
    long elapsed = System.nanoTime() - start;
    int total = 0;
    for (int c : count) {
      total += c;
    }
    long[] all = new long[total];
    int k = 0;
    for (int i = 0; i < threads; i++) {
      System.arraycopy(lat[i], 0, all, k, count[i]);
      k += count[i];
    }
    Arrays.sort(all);
    double p50 = total > 0 ? all[(int) (total * 0.50)] / 1e6 : 0;
    double p99 = total > 0 ? all[Math.min(total - 1, (int) (total * 0.99))] / 1e6 : 0;
    System.out.printf("{\"op\":\"%s\",\"threads\":%d,\"ops_per_s\":%.1f,\"operations\":%d,\"errors\":%d,"
            + "\"elapsed_ms\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"tool\":\"RpcBench\",\"target\":\"%s\",\"hadoop\":\"3.4.1\"}%n",
        op, threads, total / (elapsed / 1e9), total, errors.get(), elapsed / 1_000_000, p50, p99, uri);
    System.exit(0);
  }

  // alreadyExists reports whether a create failed because the file is there, whether the proxy
  // unwrapped the NameNode's exception or passed it on as a RemoteException.
  static boolean alreadyExists(Exception e) {
    return e instanceof FileAlreadyExistsException
        || (e instanceof RemoteException && ((RemoteException) e).getClassName().endsWith("FileAlreadyExistsException"));
  }

  // fill creates count empty files in dir with threads threads, each taking every threads-th name,
  // and prints one JSON line like the timed ops (ops_per_s is the creation rate).
  static void fill(ClientProtocol nn, URI uri, int threads, long count, String dir) throws Exception {
    nn.mkdirs(dir, new FsPermission((short) 0755), true);
    final AtomicLong done = new AtomicLong(), existed = new AtomicLong(), errors = new AtomicLong();
    final FsPermission perm = new FsPermission((short) 0644);
    final String client = "RpcBench-fill-" + System.nanoTime();
    final long start = System.nanoTime();
    Thread[] ts = new Thread[threads];
    for (int i = 0; i < threads; i++) {
      final int id = i;
      ts[i] = new Thread(() -> {
        for (long k = id; k < count; k += threads) {
          String p = String.format("%s/f%07d", dir, k);
          try {
            HdfsFileStatus st = nn.create(p, perm, client,
                new EnumSetWritable<>(EnumSet.of(CreateFlag.CREATE)), false, (short) 1,
                128L << 20, CryptoProtocolVersion.supported(), null, null);
            nn.complete(p, client, null, st.getFileId());
          } catch (Exception e) {
            if (alreadyExists(e)) {
              existed.incrementAndGet();
            } else if (errors.incrementAndGet() <= 3) {
              System.err.println("RpcBench: fill: " + p + ": " + e);
            }
          }
          long n = done.incrementAndGet();
          if (n % 100000 == 0) {
            System.err.printf("RpcBench: fill: %d/%d in %.0f s%n", n, count, (System.nanoTime() - start) / 1e9);
          }
        }
      });
      ts[i].start();
    }
    for (Thread t : ts) {
      t.join();
    }
    long elapsed = System.nanoTime() - start;
    System.out.printf("{\"op\":\"fill\",\"threads\":%d,\"ops_per_s\":%.1f,\"operations\":%d,\"existed\":%d,"
            + "\"errors\":%d,\"elapsed_ms\":%d,\"tool\":\"RpcBench\",\"target\":\"%s\",\"dir\":\"%s\",\"hadoop\":\"3.4.1\"}%n",
        threads, done.get() / (elapsed / 1e9), done.get(), existed.get(), errors.get(), elapsed / 1_000_000, uri, dir);
    if (errors.get() > 0) {
      System.exit(1);
    }
  }
}
