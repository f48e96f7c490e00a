(ns stutter.nemesis
  "Faults, on top of jepsen.nemesis.combined:

    partition  network partitions: a clean majority/minority split, the
               current leader(s) isolated (asked over `status`), a bridge
               (two halves joined by one node that sees both), and
               overlapping majorities in a ring
    kill       kill -9 one node, a majority, or the leader; restart later
    pause      SIGSTOP / SIGCONT (Jepsen's hammer time): the process freezes
               with all its threads, like a stop-the-world GC pause, while
               the kernel keeps accepting its TCP
    clock      (optional) clock bumps and strobes on the nodes; needs a
               compiler on the nodes and root; not in `all`
    gc         (optional, needs --gc) SIGUSR1 asks replicas' collector
               models for a full collection: stop-the-world at once, or
               through the GC coordination with --gc MODEL:RATIO:blade (a
               leader hands off first); not in `all`
    power      (optional; the data directories on faultfs mounts, its
               binary from --faultfs-binary) a power cut of one node
               (the leader or a random one), a minority, or all: what
               their replicas had not fsynced is lost (half the cuts tear
               the last unsynced write), then kill -9; power returns and
               they restart at the next power-on; not in `all`

  `--nemesis` takes a comma-separated list of these, `all` (partition,
  kill, pause) or `none`."
  (:require [clojure.string :as str]
            [jepsen [control :as c]
                    [db :as jdb]
                    [generator :as gen]
                    [nemesis :as n]]
            [jepsen.nemesis.combined :as nc]
            [stutter.db :as sdb]))

(def all-faults #{:partition :kill :pause})
(def known-faults #{:partition :kill :pause :clock :gc :power})

(defn parse-faults
  "\"partition,pause\" -> #{:partition :pause}; \"all\" and \"none\" too."
  [s]
  (->> (str/split (str s) #"[,\s]+")
       (remove str/blank?)
       (mapcat (fn [f]
                 (case f
                   "all"  all-faults
                   "none" []
                   (let [k (keyword f)]
                     (when-not (known-faults k)
                       (throw (IllegalArgumentException.
                                (str "unknown nemesis " f "; expected one of "
                                     (str/join ", " (map name (sort known-faults)))
                                     ", all, none"))))
                     [k]))))
       set))

(def power-variants [:one :minority :all])

(defn parse-power-variants
  "\"one,all\" -> [:one :all]: the power cuts to draw from."
  [s]
  (let [vs (->> (str/split (str s) #"[,\s]+") (remove str/blank?) (mapv keyword))]
    (when-let [bad (seq (remove (set power-variants) vs))]
      (throw (IllegalArgumentException.
               (str "unknown power variant " (name (first bad)) "; expected one of one, minority, all"))))
    (when (empty? vs)
      (throw (IllegalArgumentException. "no power variant given")))
    vs))

(defn bridge-grudge
  "Jepsen's bridge: two halves that cannot see each other, and one node in
  the middle that sees both (for 3 nodes: n1 | n2 | n3 with n2 seeing
  both)."
  [nodes]
  (n/bridge (vec nodes)))

(defn gc-nemesis
  "Asks replicas to collect: {:f :gc, :value :one | :primaries | :all}
  sends SIGUSR1 to those nodes' replicas. The collection is the model's
  own (its length from the heap), not a blind SIGSTOP."
  [db]
  (reify n/Nemesis
    (setup! [this test] this)
    (invoke! [this test op]
      (let [nodes   (vec (:nodes test))
            targets (case (:value op)
                      :all       nodes
                      :primaries (jdb/primaries db test)
                      [(rand-nth nodes)])]
        (assoc op :value
               (c/on-nodes test targets
                           (fn [test node] (sdb/signal-replica! test node "USR1"))))))
    (teardown! [this test])
    n/Reflection
    (fs [this] #{:gc})))

(defn gc-package
  "The gc fault as a jepsen.nemesis.combined package."
  [{:keys [db interval]}]
  {:nemesis         (gc-nemesis db)
   ; A function is a generator called for every op it gives.
   :generator       (gen/stagger (or interval 10)
                                 (fn [] {:type :info, :f :gc, :value (rand-nth [:one :primaries :all])}))
   :final-generator nil
   :perf            #{{:name "gc", :fs #{:gc}, :color "#C5A3E8"}}})

(defn power-targets
  "The nodes a power cut of `variant` falls on, as jepsen/run draws them:
  :one the leader half the time, else a random node; :minority (n-1)/2
  random nodes; :all every node."
  [db test variant]
  (let [nodes (vec (:nodes test))]
    (case variant
      :one      [(if (< (rand) 0.5) (rand-nth (vec (jdb/primaries db test))) (rand-nth nodes))]
      :minority (vec (take (quot (dec (count nodes)) 2) (shuffle nodes)))
      :all      nodes)))

(def cut-lead-ms
  "How far ahead of now a power cut is set to fall on its nodes."
  1500)

(defn power-nemesis
  "{:f :power, :value :one | :minority | :all} cuts the power of those
  nodes: every target's disk first, all at one instant by the nodes'
  clocks (faultfs cut --at: the unsynced data is dropped and the disk
  fails every change from then on), then kill -9 of each.
  {:f :power-on} restores the power of every node cut and restarts its
  replica on what its disk kept. The op's value says what each cut lost."
  [db]
  (let [down (atom #{})]
    (reify n/Nemesis
      (setup! [this test] this)
      (invoke! [this test op]
        (case (:f op)
          :power
          (let [targets (remove @down (power-targets db test (:value op)))
                ; One instant for every target, far enough ahead for the
                ; SSH commands to arrive (a cut and a kill of one node
                ; took about 1.1 s here).
                at-ms   (+ (System/currentTimeMillis) cut-lead-ms)]
            ; Down before the cut: should a cut or a kill fail half-way,
            ; power-on still restores every target's disk and replica.
            (swap! down into targets)
            (let [lost (when (seq targets)
                         (c/on-nodes test targets
                                     (fn [test node]
                                       (sdb/power-cut! test node (when (< (rand) 0.5) (rand-int Integer/MAX_VALUE))
                                                       at-ms))))]
              (when (seq targets)
                (c/on-nodes test targets (fn [test node] (sdb/kill-replica! test node))))
              (assoc op :value [(:value op) (into (sorted-map) lost)])))

          :power-on
          (let [targets (vec (sort @down))]
            (when (seq targets)
              (c/on-nodes test targets
                          (fn [test node]
                            (sdb/power-on! test node)
                            (sdb/start-replica! test node))))
            (reset! down #{})
            (assoc op :value targets))))
      (teardown! [this test])
      n/Reflection
      (fs [this] #{:power :power-on}))))

(defn power-package
  "The power fault as a jepsen.nemesis.combined package: a cut, then the
  power back, alternately. opts: :db, :interval, :power-variants."
  [{:keys [db interval] :as opts}]
  (let [variants (vec (or (:power-variants opts) power-variants))]
    {:nemesis         (power-nemesis db)
     :generator       (gen/stagger (or interval 10)
                                   (gen/flip-flop
                                     (fn [] {:type :info, :f :power, :value (rand-nth variants)})
                                     (repeat {:type :info, :f :power-on})))
     :final-generator {:type :info, :f :power-on}
     :perf            #{{:name "power", :start #{:power}, :stop #{:power-on}, :color "#E8A3A3"}}}))

(defn package
  "A combined nemesis package. opts: :db, :nodes, :faults (a set),
  :interval (seconds between faults).

  Only the packages for the requested faults are built: composing all of
  jepsen.nemesis.combined's packages (nemesis-package) would also set up the
  file-corruption and clock nemeses on every node, which download and
  compile tools there even when those faults are never used."
  [{:keys [nodes faults] :as opts}]
  (let [opts (merge opts
                    {:faults    faults
                     :partition {:targets [:majority
                                           :primaries           ; leader isolation
                                           (bridge-grudge nodes)
                                           :majorities-ring]}
                     :kill      {:targets [:one :primaries :majority]}
                     :pause     {:targets [:one :primaries :majority]}})]
    (nc/compose-packages
      (cond-> []
        (faults :partition)                     (conj (nc/partition-package opts))
        (some faults [:kill :pause])            (conj (nc/db-package opts))
        (faults :clock)                         (conj (nc/clock-package opts))
        (faults :gc)                            (conj (gc-package opts))
        (faults :power)                         (conj (power-package opts))))))
