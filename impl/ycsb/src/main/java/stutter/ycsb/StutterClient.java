package stutter.ycsb;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Vector;

import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB binding for stutter. Speaks the line protocol of stutter's client
 * port ({@code get k}, {@code put k v}, {@code del k}), finding the leader by
 * trying the replicas in turn when told {@code leader is ...} or
 * {@code retry}. A record's fields are stored as one value (see
 * {@link RecordCodec}).
 *
 * <p>Properties: {@code stutter.hosts} (comma-separated host:port client
 * addresses, default 127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203),
 * {@code stutter.timeoutms} (default 2000).
 */
public class StutterClient extends DB {
  private final List<InetSocketAddress> hosts = new ArrayList<>();
  private int current;
  private int timeoutMs;
  private Socket socket;
  private BufferedReader in;
  private OutputStream out;

  /** Tries per operation before giving up (a leader change takes a few). */
  private static final int MAX_TRIES = 12;

  @Override
  public void init() throws DBException {
    String spec = getProperties().getProperty("stutter.hosts", "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203");
    for (String h : spec.split(",")) {
      String t = h.trim();
      int colon = t.lastIndexOf(':');
      if (colon <= 0) {
        throw new DBException("bad stutter.hosts entry: " + t);
      }
      hosts.add(new InetSocketAddress(t.substring(0, colon), Integer.parseInt(t.substring(colon + 1))));
    }
    timeoutMs = Integer.parseInt(getProperties().getProperty("stutter.timeoutms", "2000"));
    current = (int) (Thread.currentThread().getId() % hosts.size());
  }

  @Override
  public void cleanup() {
    close();
  }

  private void close() {
    if (socket != null) {
      try {
        socket.close();
      } catch (IOException ignored) {
        // closing a broken connection: nothing left to do
      }
    }
    socket = null;
  }

  private void nextReplica() {
    close();
    current = (current + 1) % hosts.size();
  }

  /** Sends one request line; returns the reply line, or null to retry elsewhere. */
  private String roundTrip(String line) {
    try {
      if (socket == null) {
        socket = new Socket();
        socket.setTcpNoDelay(true);
        socket.connect(hosts.get(current), timeoutMs);
        socket.setSoTimeout(timeoutMs);
        in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        out = socket.getOutputStream();
      }
      out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
      out.flush();
      String reply = in.readLine();
      if (reply == null) {
        nextReplica();
        return null;
      }
      if (reply.startsWith("leader is") || reply.equals("retry")) {
        nextReplica();
        return null;
      }
      return reply;
    } catch (IOException e) {
      nextReplica();
      return null;
    }
  }

  private String call(String line) {
    for (int i = 0; i < MAX_TRIES; i++) {
      String r = roundTrip(line);
      if (r != null) {
        return r;
      }
    }
    return null;
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    String reply = call("get " + key);
    if (reply == null) {
      return Status.SERVICE_UNAVAILABLE;
    }
    if (reply.isEmpty()) {
      return Status.NOT_FOUND;
    }
    if (reply.startsWith("error")) {
      return Status.ERROR;
    }
    Map<String, String> record = RecordCodec.decode(reply);
    if (record == null) {
      return Status.UNEXPECTED_STATE;
    }
    for (Map.Entry<String, String> e : record.entrySet()) {
      if (fields == null || fields.contains(e.getKey())) {
        result.put(e.getKey(), new StringByteIterator(e.getValue()));
      }
    }
    return Status.OK;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    // A YCSB update replaces the named fields: read-modify-write would need
    // a transaction; workloads A and B write every field (writeallfields).
    return insert(table, key, values);
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    Map<String, String> record = new HashMap<>();
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      record.put(e.getKey(), e.getValue().toString());
    }
    String reply = call("put " + key + " " + RecordCodec.encode(record));
    if (reply == null) {
      return Status.SERVICE_UNAVAILABLE;
    }
    return reply.equals("ok") || reply.isEmpty() ? Status.OK : Status.ERROR;
  }

  @Override
  public Status delete(String table, String key) {
    String reply = call("del " + key);
    if (reply == null) {
      return Status.SERVICE_UNAVAILABLE;
    }
    return reply.equals("ok") || reply.isEmpty() ? Status.OK : Status.ERROR;
  }
}
