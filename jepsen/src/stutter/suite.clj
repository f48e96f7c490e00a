(ns stutter.suite
  "The `suite` command: several runs of the test in one JVM (Jepsen's
  namespaces load once), each with the verdict it must reach, then
  optionally Knossos on campaign histories (stutter.recheck).

    lein run suite --nodes-file nodes ... [--runs none,combined] [--repeat N] [--recheck DIR]...

  Every option of `test` applies to every run; each run then sets its own
  faults (and --gc, --unsafe-local-reads; the negative control its rate)
  on top. A run passes when its verdict is the expected one (true for the
  safe runs, false for the negative control: :unknown passes neither) and
  every fault it names was carried out at least once. Prints one line per
  run and exits 1 unless every run and every recheck passed."
  (:require [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [cli :as cli]
                    [core :as jepsen]
                    [store :as store]]
            [stutter [gc-opts :as gc-opts]
                     [recheck :as recheck]]))

(def runs
  "The suite, in order. :opts go over the command line's options; :expect
  is the verdict the run must reach; :default? false runs only when --runs
  names it."
  [{:name "none", :opts {:nemesis #{}}, :expect true}
   ; 60 s, not the suite's 30: the db package picks kill or pause at random
   ; for each fault, and a 30 s run on 2026-11-28 drew three pauses and no
   ; kill ("never carried out: kill"); twice the faults make that unlikely.
   {:name "combined", :opts {:nemesis #{:partition :kill :pause}, :time-limit 60}, :expect true}
   {:name "gc-g1-blade", :opts {:nemesis #{:gc}, :gc (gc-opts/parse-gc "g1:2:blade")}, :expect true}
   {:name "gc-go", :opts {:nemesis #{:gc}, :gc (gc-opts/parse-gc "go:2")}, :expect true}
   ; The data directories on faultfs mounts (--faultfs-binary). Values
   ; from [0, 20), not 5: a cut of every node times out every client, and
   ; each write or cas in flight ends :info; with five values one of them
   ; can hold the value a lost write had overwritten, and Knossos then
   ; accepts the loss (stutter.workload/register, docs/campaigns-jepsen.md).
   ; Twenty still let some cas succeed, which :stats requires.
   {:name "power", :opts {:nemesis #{:power}, :value-range 20}, :expect true}
   ; A replica that acknowledges after its write and before its sync (a
   ; replica built with node-bugs): cuts of every node lose writes it
   ; acknowledged, and a later read or cas of the key (the final reads
   ; included) sees the older value. Caught in 7 of 7 runs on 2026-12-08
   ; (docs/campaigns-jepsen.md); only when named (:default? false): it
   ; needs that build, and jepsen/ci's power control is CI's.
   {:name "power-ack-before-sync", :default? false, :expect false
    :opts {:nemesis #{:power}, :power-variants [:all], :node-bug "ack-before-sync",
           :value-range 20}}
   ; Any replica answers reads from its own state: a partitioned follower
   ; serves values the majority has overwritten. At twice the rate: every
   ; one of 14 runs at rate 20 was caught, but one of them on a single key
   ; of 13, too thin a margin for "every CI run".
   {:name "unsafe-local-reads", :opts {:nemesis #{:partition}, :unsafe-local-reads true, :rate 40}, :expect false}])

(def fault-fs
  "The :f of the nemesis op that carries out each fault."
  {:partition :start-partition, :kill :kill, :pause :pause, :gc :gc, :clock :bump-clock, :power :power})

(defn nemesis-completions
  "The nemesis's completed ops. The nemesis is one process that runs one
  op at a time, and logs both invocation and completion as :info: every
  second op of its is a completion."
  [history]
  (->> history
       (filter #(= :nemesis (:process %)))
       (partition 2)
       (map second)))

(defn run-summary
  "Counts of a finished run: ops, keys and ops per key, Knossos's per-key
  verdicts, faults carried out."
  [test]
  (let [history (:history test)
        client  (filter #(integer? (:process %)) history)
        types   (frequencies (map :type client))
        keys    (get-in test [:results :workload :results])
        per-key (vals (frequencies (for [op client :when (= :invoke (:type op))]
                                     (first (:value op)))))
        ; Writes and cas that ended :info: Knossos keeps each open to the
        ; end of its key, and its cost grows with their number.
        crashed (vals (frequencies (for [op client
                                         :when (and (= :info (:type op)) (not= :read (:f op)))]
                                     (first (:value op)))))
        linear  (frequencies (map #(get-in % [:linear :valid?]) (vals keys)))
        faults  (frequencies (map :f (nemesis-completions history)))]
    {:valid?       (get-in test [:results :valid?])
     :invoked      (types :invoke 0)
     :ok           (types :ok 0), :fail (types :fail 0), :info (types :info 0)
     :keys         (count keys)
     :ops-per-key  (if (seq per-key) (reduce max per-key) 0)
     :crashed-per-key (if (seq crashed) (reduce max crashed) 0)
     :linear       linear
     :faults       faults
     :dir          (some-> test store/path .getPath)}))

(defn judge
  "Adds :pass? and :why to a run's summary. A run expected to fail must
  fail on linearizability (Knossos false on some key), not only on another
  checker (:stats fails a run in which no cas succeeded)."
  [{:keys [opts expect]} s]
  (let [missing (for [f (:nemesis opts) :when (zero? (get (:faults s) (fault-fs f) 0))] f)]
    (cond
      (not= expect (:valid? s))
      (assoc s :pass? false :why (str "expected :valid? " expect ", got " (pr-str (:valid? s))))

      (and (false? expect) (zero? (get (:linear s) false 0)))
      (assoc s :pass? false :why "invalid, but Knossos found no key non-linearizable")

      (seq missing)
      (assoc s :pass? false :why (str "never carried out: " (str/join ", " (map name missing))))

      :else (assoc s :pass? true))))

(defn run-one!
  [test-fn options run]
  (let [t0 (System/nanoTime)
        s  (try
             (run-summary (jepsen/run! (test-fn (merge options (:opts run)))))
             (catch Throwable t
               (warn t "run" (:name run) "crashed")
               {:valid? :crashed, :error (str t)}))]
    (assoc (judge run s) :name (:name run) :expect (:expect run)
           :seconds (/ (- (System/nanoTime) t0) 1e9))))

(defn line
  [{:keys [name pass? why valid? expect invoked ok fail info keys ops-per-key crashed-per-key
           linear faults seconds dir error]}]
  (format "%s %s: :valid? %s (expected %s); %d ops (ok/fail/info %d/%d/%d), %d keys, at most %d ops and %d crashed writes/cas per key; Knossos per key true/false/unknown %d/%d/%d; faults %s; %.0f s; %s%s"
          (if pass? "PASS" "FAIL") name (pr-str valid?) expect
          (or invoked 0) (or ok 0) (or fail 0) (or info 0) (or keys 0) (or ops-per-key 0) (or crashed-per-key 0)
          (get linear true 0) (get linear false 0) (get linear :unknown 0)
          (pr-str (or faults {})) (double seconds) (or dir error "")
          (if why (str " -- " why) "")))

(def opt-spec
  [[nil "--runs NAMES" (str "Comma-separated runs of the suite: " (str/join ", " (map :name runs))
                            "; by default all but " (str/join ", " (map :name (filter #(false? (:default? %)) runs))))
    :default  (mapv :name (remove #(false? (:default? %)) runs))
    :parse-fn #(str/split % #",")
    :validate [#(every? (set (map :name runs)) %) "unknown run name"]]
   [nil "--repeat N" "Run each chosen run N times (how often does a run miss?)."
    :default  1
    :parse-fn parse-long
    :validate [pos? "must be positive"]]
   [nil "--recheck DIR" "Afterwards, Knossos on a campaign results folder (or history.edn) beside Porcupine's verdicts; repeatable."
    :default  []
    :assoc-fn (fn [m k v] (update m k (fnil conj []) v))]
   [nil "--recheck-time-limit SECONDS" "Knossos's limit per key in --recheck."
    :default  60
    :parse-fn parse-double]])

(defn cmd
  "The `suite` command for jepsen.cli/run!, with the test's own options."
  [{:keys [test-fn opt-spec opt-fn]}]
  {"suite"
   {:opt-spec (cli/merge-opt-specs cli/test-opt-spec (into (vec opt-spec) stutter.suite/opt-spec))
    :opt-fn   (comp (or opt-fn identity) cli/test-opt-fn)
    :usage    "Usage: lein run suite [test options] [--runs NAMES] [--recheck DIR]..."
    :run      (fn [{:keys [options]}]
                (let [chosen  (set (:runs options))
                      n       (:repeat options)
                      results (doall (for [r runs :when (chosen (:name r)), i (range n)]
                                       (let [r (cond-> r (> n 1) (update :name str "#" (inc i)))
                                             s (run-one! test-fn options r)]
                                         (info "suite:" (line s))
                                         s)))
                      rechecks (when (seq (:recheck options))
                                 (println "\nKnossos on campaign histories:")
                                 (recheck/recheck! (:recheck options)
                                                   (long (* 1000 (:recheck-time-limit options)))
                                                   {}))
                      ; A history without Porcupine's verdicts is no agreement.
                      ok? (and (every? :pass? results)
                               (every? #(true? (:agree? %)) rechecks))]
                  (println "\nJepsen runs:")
                  (doseq [s results] (println (line s)))
                  (println (format "%d of %d runs as expected%s" (count (filter :pass? results)) (count results)
                                   (if (seq rechecks)
                                     (format "; Knossos agrees with Porcupine on %d of %d histories (%d of %d keys)"
                                             (count (filter :agree? rechecks)) (count rechecks)
                                             (count (filter :agree? (mapcat :keys rechecks)))
                                             (count (mapcat :keys rechecks)))
                                     "")))
                  (when-not ok? (System/exit 1))))}})
