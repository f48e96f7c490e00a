(ns stutter.core
  "Entry point: `lein run test --nodes-file nodes --replica-binary
  target/release/replica --nemesis pause --time-limit 300`; also `suite`
  (stutter.suite), `recheck` (stutter.recheck) and `serve`."
  (:require [clojure.string :as str]
            [clojure.tools.logging :refer [info warn]]
            [jepsen [checker :as checker]
                    [cli :as cli]
                    [generator :as gen]
                    [os :as os]
                    [tests :as tests]]
            [jepsen.os.debian :as debian]
            [stutter [db :as db]
                     [gc-opts :as gc-opts]
                     [nemesis :as nemesis]
                     [recheck :as recheck]
                     [suite :as suite]
                     [workload :as workload]]))

(def cli-opts
  "Options on top of Jepsen's own (--nodes, --nodes-file, --username,
  --concurrency, --time-limit, --test-count, --ssh-private-key, ...)."
  [[nil "--replica-binary PATH" "Local path of the replica binary to upload to every node."
    :default "target/release/replica"]
   [nil "--nemesis FAULTS" "Comma-separated faults: partition, kill, pause, clock, gc, power; or all / none."
    :default  #{:partition :kill :pause}
    :parse-fn nemesis/parse-faults]
   [nil "--faultfs-binary PATH" "Local path of impl/faultfs's binary (cargo build --release -p stutter-faultfs), uploaded to every node when the power nemesis runs: their data directories become faultfs mounts."
    :default "target/release/faultfs"]
   [nil "--faultfs-sync-ms MS" "Milliseconds each fsync on a faultfs mount takes before it makes anything durable, so that power cuts fall during syncs."
    :default  20
    :parse-fn parse-long
    :validate [#(not (neg? %)) "must not be negative"]]
   [nil "--power-variants LIST" "Comma-separated power cuts to draw from: one (the leader half the time, else a random node), minority, all."
    :default  [:one :minority :all]
    :parse-fn nemesis/parse-power-variants]
   [nil "--gc MODEL:RATIO[:blade]" "Every replica runs a collector model (go or g1, memory limit RATIO x 64 MiB of modelled data); blade turns GC coordination on. Needed by the gc nemesis."
    :parse-fn gc-opts/parse-gc]
   [nil "--nemesis-interval SECONDS" "Mean seconds between nemesis operations."
    :default  10
    :parse-fn parse-double
    :validate [pos? "must be positive"]]
   ["-r" "--rate HZ" "Approximate request rate, in Hz, over all clients."
    :default  10
    :parse-fn parse-double
    :validate [pos? "must be positive"]]
   [nil "--workload NAME" "Workload to run."
    :default  "register"
    :validate [workload/workloads (str "one of " (str/join ", " (keys workload/workloads)))]]
   [nil "--ops-per-key N" "Operations on one key before moving on to the next."
    :default  200
    :parse-fn parse-long
    :validate [pos? "must be positive"]]
   [nil "--value-range N" "Writes and cas draw their values from [0, N): few make cas succeed often, many keep an indeterminate write from explaining a lost one (stutter.workload/register)."
    :default  5
    :parse-fn parse-long
    :validate [pos? "must be positive"]]
   [nil "--threads-per-key N" "Processes sharing one key at a time; --concurrency must be a multiple."
    :default  3
    :parse-fn parse-long
    :validate [pos? "must be positive"]]
   [nil "--knossos-time-limit SECONDS" "Knossos's limit per key; a key it cannot decide in time is :unknown."
    :default  300
    :parse-fn parse-double
    :validate [pos? "must be positive"]]
   [nil "--client-timeout MS" "How long a client waits for a reply before recording :info."
    :default  1000
    :parse-fn parse-long]
   [nil "--base-dir DIR" "Per-node directory root on the nodes."
    :default  db/default-base-dir]
   [nil "--os NAME" "debian: prepare Debian nodes (packages, /etc/hosts); none: leave them alone."
    :default  "debian"
    :validate [#{"debian" "none"} "debian or none"]]
   [nil "--node-bug NAME" "Negative control: start replicas with STUTTER_NODE_BUG=NAME, e.g. ack-before-sync (a replica built with the node-bugs feature; docs/simulator-turmoil.md, \"Injected node bugs\"). Jepsen must report :valid? false."]
   [nil "--unsafe-local-reads" "Negative control: start replicas with --unsafe-local-reads (any replica answers get from local state). Jepsen must report :valid? false."
    :default false]])

(defn stutter-test
  "Builds a test map from parsed CLI options."
  [opts]
  (let [wl      ((workload/workloads (:workload opts)) opts)
        db      (db/db opts)
        faults  (:nemesis opts)
        pkg     (nemesis/package {:db       db
                                  :nodes    (:nodes opts)
                                  :faults   faults
                                  :interval (:nemesis-interval opts)
                                  :power-variants (:power-variants opts)})
        per-key (:threads-per-key opts)]
    (when (and (faults :gc) (not (:gc opts)))
      (throw (IllegalArgumentException. "the gc nemesis needs --gc MODEL:RATIO[:blade]")))
    (when-not (zero? (mod (:concurrency opts) per-key))
      (throw (IllegalArgumentException.
               (str "--concurrency " (:concurrency opts)
                    " is not a multiple of --threads-per-key " per-key))))
    (merge tests/noop-test
           opts
           {:name      (str "stutter " (:workload opts) " "
                            (if (seq faults) (str/join "," (map name (sort faults))) "none")
                            (when (:unsafe-local-reads opts) " UNSAFE-LOCAL-READS")
                            (when-let [b (:node-bug opts)] (str " NODE-BUG " b)))
            :pure-generators true
            ; Data directories on faultfs mounts only where a power cut
            ; needs them: every fsync there takes --faultfs-sync-ms.
            :faultfs?  (boolean (faults :power))
            :os        (if (= "none" (:os opts)) os/noop debian/os)
            :db        db
            :client    (:client wl)
            :nemesis   (:nemesis pkg)
            :checker   (checker/compose
                         {:perf       (checker/perf {:nemeses (:perf pkg)})
                          :stats      (checker/stats)
                          :exceptions (checker/unhandled-exceptions)
                          :workload   (:checker wl)})
            :generator (gen/phases
                         (->> (:generator wl)
                              (gen/stagger (/ (:rate opts)))
                              (gen/nemesis (:generator pkg))
                              (gen/time-limit (:time-limit opts)))
                         ; Heal everything and let the cluster settle, then
                         ; read every key once (stutter.workload/register);
                         ; teardown collects the logs.
                         (gen/nemesis (:final-generator pkg))
                         (gen/sleep 5)
                         (->> (:final-generator wl)
                              (gen/clients)
                              (gen/time-limit 60)))})))

(defn -main
  [& args]
  (cli/run! (merge (cli/single-test-cmd {:test-fn  stutter-test
                                         :opt-spec cli-opts})
                   (suite/cmd {:test-fn  stutter-test
                               :opt-spec cli-opts})
                   (recheck/cmd)
                   (cli/serve-cmd))
            args))
