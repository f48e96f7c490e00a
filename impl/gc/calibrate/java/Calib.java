// Calib measures the JVM's G1 collector under a KV-store workload: a live
// heap of map entries and a paced mutator that allocates request and reply
// buffers and overwrites values. Run it with
//   java -Xms<M> -Xmx<M> -XX:+UseG1GC -Xlog:gc*:file=<log>:uptime,level,tags Calib.java --mode steady ...
// It prints one JSON object on stdout; the GC log holds the per-collection
// figures (pause lengths, region counts), which the calibration driver parses.
//
// Modes:
//   live    build the heap and report its live size (run with a roomy -Xmx),
//           so that the driver can size -Xmx as a multiple of it;
//   steady  a warm-up, then a measured window of paced requests;
//   forced  time full collections (System.gc()) with the mutator stopped.

import com.sun.management.ThreadMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

public class Calib {
    static final int KEY_LEN = 23;     // "user" and 19 digits, as YCSB and the project's bench
    static final int FRAME_HEADER = 32; // framing around a key and a value on the wire

    // ---- the live heap and the request path ---------------------------------

    static final class Store {
        final HashMap<String, byte[]> map = new HashMap<>();
        final ArrayList<String> keyList = new ArrayList<>();
        String[] keys = new String[0];
        final int valueSize;
        final double update;
        final byte[][] sinkRing = new byte[64][];
        int sinkNext;

        Store(int valueSize, double update) {
            this.valueSize = valueSize;
            this.update = update;
        }

        void insert(int i) {
            String k = String.format(Locale.ROOT, "user%019d", i);
            byte[] v = new byte[valueSize];
            v[0] = (byte) i;
            map.put(k, v);
            keyList.add(k);
        }

        void freeze() {
            keys = keyList.toArray(new String[0]);
        }

        // Keeps the last few buffers reachable, as requests in flight are,
        // and keeps escape analysis from removing the allocations.
        void sink(byte[] b) {
            sinkRing[sinkNext] = b;
            sinkNext = (sinkNext + 1) % sinkRing.length;
        }

        // One KV operation as a server handles it: a decoded request frame,
        // then an update (a fresh value replaces the old one, which becomes
        // garbage) or a read (a reply frame carrying a copy of the value).
        void request(SplittableRandom r) {
            int i = r.nextInt(keys.length);
            String key = keys[i];
            byte[] req = new byte[FRAME_HEADER + KEY_LEN + valueSize];
            req[0] = (byte) i;
            if (r.nextDouble() < update) {
                byte[] v = new byte[valueSize];
                System.arraycopy(req, FRAME_HEADER + KEY_LEN, v, 0, valueSize);
                v[0] = (byte) i;
                map.put(key, v);
                sink(new byte[FRAME_HEADER]);
            } else {
                byte[] v = map.get(key);
                byte[] reply = new byte[FRAME_HEADER + v.length];
                System.arraycopy(v, 0, reply, FRAME_HEADER, v.length);
                sink(reply);
            }
            sink(req);
        }
    }

    static long usedAfterFullGc() {
        System.gc();
        System.gc();
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    // Fills the store to about target bytes of live heap, learning the cost
    // of one entry from a sample and correcting a few times (HashMap and
    // the key list grow by doubling).
    static Store build(long target, int entries, int valueSize, double update) {
        Store s = new Store(valueSize, update);
        if (entries > 0) {
            for (int i = 0; i < entries; i++) s.insert(i);
            s.freeze();
            return s;
        }
        long base = usedAfterFullGc();
        int sample = 1 << 14;
        for (int i = 0; i < sample; i++) s.insert(i);
        long live = usedAfterFullGc();
        double perEntry = (double) (live - base) / sample;
        for (int round = 0; round < 4 && live < target; round++) {
            int more = (int) ((target - live) / perEntry);
            if (more < sample / 16) break;
            int n = s.keyList.size();
            for (int i = n; i < n + more; i++) s.insert(i);
            live = usedAfterFullGc();
        }
        s.freeze();
        return s;
    }

    // ---- load ---------------------------------------------------------------

    // Open loop: by any instant t the mutator has issued rate × (t − start)
    // requests, catching up in a burst when it fell behind.
    static long pace(Store s, SplittableRandom r, double rate, long startNs, long endNs) {
        long n = 0;
        while (true) {
            long now = System.nanoTime();
            if (now >= endNs) return n;
            long due = (long) (rate * (now - startNs) / 1e9);
            while (n < due) {
                s.request(r);
                n++;
                if ((n & 511) == 0 && System.nanoTime() >= endNs) return n;
            }
            sleepNs(500_000);
        }
    }

    static void sleepNs(long ns) {
        try {
            Thread.sleep(ns / 1_000_000, (int) (ns % 1_000_000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // Tiny requests on a thread of their own at a fixed rate, each timed from
    // its intended start (no coordinated omission).
    static final class Prober implements Runnable {
        final HashMap<String, byte[]> map = new HashMap<>();
        final String[] keys = new String[1024];
        final int valueSize;
        final double rate;
        final long startNs, endNs;
        final boolean record;
        final SplittableRandom r;
        long[] latencies = new long[1 << 12];
        int n;
        volatile byte[] sinkReq, sinkReply;

        Prober(int valueSize, double rate, long startNs, long endNs, boolean record, long seed) {
            this.valueSize = valueSize;
            this.rate = rate;
            this.startNs = startNs;
            this.endNs = endNs;
            this.record = record;
            this.r = new SplittableRandom(seed);
            for (int i = 0; i < keys.length; i++) {
                keys[i] = String.format(Locale.ROOT, "user%019d", i);
                map.put(keys[i], new byte[valueSize]);
            }
        }

        public void run() {
            long period = (long) (1e9 / rate);
            for (long k = 0; ; k++) {
                long intended = startNs + k * period;
                if (intended >= endNs) return;
                long wait = intended - System.nanoTime();
                if (wait > 0) sleepNs(wait);
                String key = keys[r.nextInt(keys.length)];
                byte[] req = new byte[FRAME_HEADER + KEY_LEN + valueSize];
                byte[] v = map.get(key);
                byte[] reply = new byte[FRAME_HEADER + v.length];
                System.arraycopy(v, 0, reply, FRAME_HEADER, v.length);
                sinkReq = req;
                sinkReply = reply;
                if (record) {
                    if (n == latencies.length) latencies = Arrays.copyOf(latencies, 2 * n);
                    latencies[n++] = System.nanoTime() - intended;
                }
            }
        }
    }

    // ---- CPU time per kind of thread, from /proc ----------------------------

    static final String[] KINDS = {"gc_pause_workers", "gc_conc_mark", "gc_refine", "gc_service", "vm_thread", "jit", "mutator", "other"};

    // Time on a CPU and time waiting for one (runnable, on a run queue) of
    // every thread of this JVM, from /proc/self/task/*/schedstat (ns grain),
    // summed by what the thread is for (G1 names its threads): pause
    // workers, concurrent markers, refinement, the VM thread, JIT
    // compilers, and the application. Keys "<kind>" hold CPU seconds and
    // "<kind>_wait" run-queue seconds.
    static Map<String, Double> threadCpu() {
        Map<String, Double> out = new LinkedHashMap<>();
        for (String k : KINDS) {
            out.put(k, 0.0);
            out.put(k + "_wait", 0.0);
        }
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path t : tasks) {
                String comm;
                String[] sched;
                try {
                    comm = Files.readString(t.resolve("comm")).trim();
                    sched = Files.readString(t.resolve("schedstat")).trim().split(" ");
                } catch (IOException e) {
                    continue; // the thread ended meanwhile
                }
                String kind = classify(comm);
                out.merge(kind, Long.parseLong(sched[0]) / 1e9, Double::sum);
                out.merge(kind + "_wait", Long.parseLong(sched[1]) / 1e9, Double::sum);
            }
        } catch (IOException e) {
            out.put("error", 1.0);
        }
        return out;
    }

    static String classify(String comm) {
        if (comm.startsWith("GC Thread")) return "gc_pause_workers";
        if (comm.startsWith("G1 Main Marker") || comm.startsWith("G1 Conc")) return "gc_conc_mark";
        if (comm.startsWith("G1 Refine")) return "gc_refine";
        if (comm.startsWith("G1 Service") || comm.startsWith("G1 Young RemSet")) return "gc_service";
        if (comm.startsWith("VM Thread")) return "vm_thread";
        if (comm.startsWith("C1 Compiler") || comm.startsWith("C2 Compiler")) return "jit";
        if (comm.equals("main") || comm.startsWith("prober")) return "mutator";
        return "other";
    }

    static double machineBusySeconds() {
        try {
            String[] f = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
            double busy = 0;
            for (int i = 1; i <= 8 && i < f.length; i++) {
                if (i == 4 || i == 5) continue; // idle, iowait
                busy += Double.parseDouble(f[i]);
            }
            return busy / 100.0;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    static String loadavg() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).trim();
        } catch (IOException e) {
            return "";
        }
    }

    static double uptimeS() {
        return ManagementFactory.getRuntimeMXBean().getUptime() / 1000.0;
    }

    // ---- JSON ---------------------------------------------------------------

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof String s) return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        if (o instanceof Double d) return d.isNaN() || d.isInfinite() ? "null" : Double.toString(d);
        if (o instanceof Number || o instanceof Boolean) return o.toString();
        if (o instanceof Map<?, ?> m) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (b.length() > 1) b.append(", ");
                b.append(json(String.valueOf(e.getKey()))).append(": ").append(json(e.getValue()));
            }
            return b.append("}").toString();
        }
        if (o instanceof List<?> l) {
            StringBuilder b = new StringBuilder("[");
            for (Object x : l) {
                if (b.length() > 1) b.append(", ");
                b.append(json(x));
            }
            return b.append("]").toString();
        }
        if (o instanceof double[] a) {
            List<Object> l = new ArrayList<>();
            for (double x : a) l.add(x);
            return json(l);
        }
        return json(o.toString());
    }

    // ---- modes --------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        Map<String, String> a = new HashMap<>(Map.of(
                "mode", "steady", "live-mib", "64", "entries", "0", "value", "500", "update", "0.5",
                "alloc-mib-s", "64", "warmup-s", "6", "measure-s", "10", "probe-rate", "0", "seed", "1"));
        a.put("cycles", "5");
        a.put("garbage", "1");
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--") || !a.containsKey(args[i].substring(2))) {
                System.err.println("unknown option " + args[i]);
                System.exit(2);
            }
            a.put(args[i].substring(2), args[i + 1]);
        }
        Thread.currentThread().setName("main");
        long target = (long) (Double.parseDouble(a.get("live-mib")) * (1 << 20));
        int valueSize = Integer.parseInt(a.get("value"));
        Store s = build(target, Integer.parseInt(a.get("entries")), valueSize, Double.parseDouble(a.get("update")));
        long seed = Long.parseLong(a.get("seed"));
        SplittableRandom r = new SplittableRandom(seed);

        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Object> config = new LinkedHashMap<>();
        config.putAll(a);
        config.put("java", System.getProperty("java.vm.version"));
        config.put("max_heap_bytes", Runtime.getRuntime().maxMemory());
        config.put("processors", Runtime.getRuntime().availableProcessors());
        config.put("jvm_args", ManagementFactory.getRuntimeMXBean().getInputArguments());
        out.put("config", config);
        Map<String, Object> heap = new LinkedHashMap<>();
        heap.put("entries", s.keys.length);
        heap.put("raw_data_bytes", (long) s.keys.length * (KEY_LEN + valueSize));
        out.put("heap", heap);

        switch (a.get("mode")) {
            case "live" -> heap.put("live_bytes", usedAfterFullGc());
            case "steady" -> steady(s, r, a, out, seed);
            case "forced" -> forced(s, r, a, out);
            default -> {
                System.err.println("unknown mode " + a.get("mode"));
                System.exit(2);
            }
        }
        System.out.println(json(out));
        System.out.flush();
        // The driver reads the JSON; a quick halt skips shutdown hooks only.
        Runtime.getRuntime().halt(0);
    }

    static void steady(Store s, SplittableRandom r, Map<String, String> a, Map<String, Object> out, long seed) throws Exception {
        ThreadMXBean tmx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        long me = Thread.currentThread().getId();
        double allocRate = Double.parseDouble(a.get("alloc-mib-s")) * (1 << 20);
        double warmup = Double.parseDouble(a.get("warmup-s"));
        double measure = Double.parseDouble(a.get("measure-s"));
        double probeRate = Double.parseDouble(a.get("probe-rate"));

        // Warm-up (JIT, the heap's young sizing): first half learns the bytes
        // per request at a provisional rate, second half runs at the rate
        // that gives the target allocation rate.
        double rate = allocRate / 1200.0;
        long t = System.nanoTime();
        long half = (long) (warmup * 1e9 / 2);
        if (probeRate > 0) startProber(s.valueSize, probeRate, t, t + 2 * half, false, seed + 2);
        long b0 = tmx.getThreadAllocatedBytes(me);
        long n = pace(s, r, rate, t, t + half);
        double bytesPerRequest = (double) (tmx.getThreadAllocatedBytes(me) - b0) / Math.max(n, 1);
        rate = allocRate / bytesPerRequest;
        t = System.nanoTime();
        pace(s, r, rate, t, t + half);

        double up0 = uptimeS();
        Map<String, Double> cpu0 = threadCpu();
        double mach0 = machineBusySeconds();
        String load0 = loadavg();
        long alloc0 = tmx.getThreadAllocatedBytes(me);
        long start = System.nanoTime(), end = start + (long) (measure * 1e9);
        Prober p = null;
        Thread pt = null;
        if (probeRate > 0) {
            p = new Prober(s.valueSize, probeRate, start, end, true, seed + 3);
            pt = new Thread(p, "prober");
            pt.setDaemon(true);
            pt.start();
        }
        long requests = pace(s, r, rate, start, end);
        if (pt != null) pt.join();
        long stop = System.nanoTime();
        long alloc = tmx.getThreadAllocatedBytes(me) - alloc0;
        Map<String, Double> cpu1 = threadCpu();
        double mach1 = machineBusySeconds();
        double up1 = uptimeS();
        double wall = (stop - start) / 1e9;

        Map<String, Object> cpu = new LinkedHashMap<>();
        double own = 0;
        for (String k : cpu1.keySet()) {
            double d = cpu1.get(k) - cpu0.getOrDefault(k, 0.0);
            cpu.put(k, d);
            if (!k.endsWith("_wait")) own += d;
        }
        out.put("thread_cpu_s", cpu);
        out.put("window", Map.of("start_s", up0, "end_s", up1, "wall_s", wall));
        Map<String, Object> load = new LinkedHashMap<>();
        load.put("target_rate", rate);
        load.put("requests", requests);
        load.put("achieved_rate", requests / wall);
        load.put("bytes_per_request", bytesPerRequest);
        load.put("alloc_bytes", alloc);
        load.put("alloc_mib_s", alloc / wall / (1 << 20));
        out.put("load", load);
        Map<String, Object> machine = new LinkedHashMap<>();
        machine.put("busy_cores", (mach1 - mach0) / wall);
        machine.put("others_busy_cores", (mach1 - mach0 - own) / wall);
        machine.put("loadavg_start", load0);
        machine.put("loadavg_end", loadavg());
        machine.put("nproc", Runtime.getRuntime().availableProcessors());
        out.put("machine", machine);
        if (p != null) {
            long[] lat = Arrays.copyOf(p.latencies, p.n);
            Arrays.sort(lat);
            Map<String, Object> pr = new LinkedHashMap<>();
            pr.put("n", lat.length);
            for (double[] q : new double[][] {{0.5}, {0.9}, {0.99}, {0.999}, {1.0}}) {
                String name = q[0] == 1.0 ? "max_s" : "p" + (q[0] * 100 % 1 == 0 ? String.valueOf((int) (q[0] * 100)) : "999") + "_s";
                pr.put(name, lat.length == 0 ? 0.0 : lat[(int) (q[0] * (lat.length - 1))] / 1e9);
            }
            out.put("probe", pr);
        }
    }

    static void startProber(int valueSize, double rate, long start, long end, boolean record, long seed) {
        Thread th = new Thread(new Prober(valueSize, rate, start, end, record, seed), "prober-warmup");
        th.setDaemon(true);
        th.start();
    }

    // Times full collections (System.gc() is a full, parallel, stop-the-world
    // collection in G1 by default) with the mutator stopped, after the
    // request path allocated garbage-ratio × live bytes of garbage.
    static void forced(Store s, SplittableRandom r, Map<String, String> a, Map<String, Object> out) {
        ThreadMXBean tmx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        long me = Thread.currentThread().getId();
        int cycles = Integer.parseInt(a.get("cycles"));
        double garbage = Double.parseDouble(a.get("garbage"));
        long live = usedAfterFullGc();
        List<Object> wall = new ArrayList<>(), gcCpu = new ArrayList<>(), starts = new ArrayList<>();
        for (int i = 0; i <= cycles; i++) {
            long a0 = tmx.getThreadAllocatedBytes(me);
            while (tmx.getThreadAllocatedBytes(me) - a0 < garbage * live) {
                for (int j = 0; j < 1024; j++) s.request(r);
            }
            Map<String, Double> c0 = threadCpu();
            double up = uptimeS();
            long t0 = System.nanoTime();
            System.gc();
            long w = System.nanoTime() - t0;
            Map<String, Double> c1 = threadCpu();
            if (i == 0) continue;
            double gc = 0;
            for (String k : new String[] {"gc_pause_workers", "vm_thread", "gc_conc_mark", "gc_refine"}) gc += c1.get(k) - c0.get(k);
            wall.add(w / 1e9);
            gcCpu.add(gc);
            starts.add(up);
        }
        out.put("live_bytes", live);
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("wall_s", wall);
        f.put("gc_thread_cpu_s", gcCpu);
        f.put("start_uptime_s", starts);
        out.put("forced", f);
        out.put("machine", Map.of("loadavg_end", loadavg(), "nproc", Runtime.getRuntime().availableProcessors()));
    }
}
