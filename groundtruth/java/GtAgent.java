// GtAgent: a Java agent of stutter's groundtruth harness, loaded into the
// JVM of a program it measures (Replicant java-tcp) with
// -javaagent:gt-agent.jar=FILE[,PERIOD_MS]; never part of that program.
// It appends one line of counters to FILE every PERIOD_MS (default 100).
//
// Why an agent: the G1 log tells pauses and what each young collection
// copied, but the bytes allocated only to the granularity of a region per
// collection; HotSpot counts every thread's allocated bytes exactly
// (com.sun.management.ThreadMXBean), and the difference of two samples is
// what the program allocated in between.
//
// Line format (space separated): unix_ns tag allocated_bytes gc_count
// gc_time_ms heap_used_bytes heap_committed_bytes jvm_start_unix_ms. The
// allocated bytes are those of the live threads plus those of threads seen
// earlier that have ended (their last sample), so the sum does not drop
// when a thread exits.

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.instrument.Instrumentation;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryUsage;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

public final class GtAgent {
  private GtAgent() {}

  public static void premain(String args, Instrumentation inst) {
    if (args == null || args.isEmpty()) {
      return;
    }
    String[] parts = args.split(",");
    String path = parts[0];
    long period = parts.length > 1 ? Long.parseLong(parts[1]) : 100;
    PrintWriter out;
    try {
      out = new PrintWriter(new FileWriter(path, true));
    } catch (IOException e) {
      System.err.println("GtAgent: " + e);
      return;
    }
    Thread t = new Thread(() -> loop(out, period), "gt-agent");
    t.setDaemon(true);
    t.start();
  }

  private static void loop(PrintWriter out, long period) {
    com.sun.management.ThreadMXBean threads =
        (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    threads.setThreadAllocatedMemoryEnabled(true);
    long start = ManagementFactory.getRuntimeMXBean().getStartTime();
    Map<Long, Long> last = new HashMap<>();
    long ended = 0;
    String tag = "start";
    while (true) {
      long[] ids = threads.getAllThreadIds();
      long[] bytes = threads.getThreadAllocatedBytes(ids);
      Set<Long> seen = new HashSet<>();
      long live = 0;
      for (int i = 0; i < ids.length; i++) {
        if (bytes[i] >= 0) {
          live += bytes[i];
          last.put(ids[i], bytes[i]);
          seen.add(ids[i]);
        }
      }
      for (var it = last.entrySet().iterator(); it.hasNext(); ) {
        var e = it.next();
        if (!seen.contains(e.getKey())) {
          ended += e.getValue();
          it.remove();
        }
      }
      long count = 0;
      long timeMs = 0;
      for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
        count += Math.max(0, gc.getCollectionCount());
        timeMs += Math.max(0, gc.getCollectionTime());
      }
      MemoryUsage heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage();
      long nowNs = System.currentTimeMillis() * 1_000_000L;
      out.printf("%d %s %d %d %d %d %d %d%n", nowNs, tag, live + ended, count, timeMs,
          heap.getUsed(), heap.getCommitted(), start);
      out.flush();
      tag = "tick";
      try {
        Thread.sleep(period);
      } catch (InterruptedException e) {
        return;
      }
    }
  }
}
