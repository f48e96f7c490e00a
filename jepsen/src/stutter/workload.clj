(ns stutter.workload
  "A linearizable compare-and-set register per key: reads, writes and cas
  of small integers on many independent keys, checked key by key by
  Knossos's cas-register model through jepsen.independent."
  (:require [clojure.tools.logging :refer [warn]]
            [jepsen [checker :as checker]
                    [generator :as gen]
                    [independent :as independent]
                    [store :as store]]
            [jepsen.checker.timeline :as timeline]
            [knossos.linear.report :as linear.report]
            [knossos.model :as model]
            [stutter [client :as client]
                     [linearizable :as linearizable]]))

(defn linearizable-checker
  "Knossos on one key's history (stutter.linearizable: a time limit that
  stops the search, indeterminate reads dropped), with Knossos's drawing
  of a violation as Jepsen's own linearizable checker makes it."
  [model time-limit-ms]
  (reify checker/Checker
    (check [this test history opts]
      (let [a (linearizable/analysis model history time-limit-ms)]
        (when (false? (:valid? a))
          (try
            (linear.report/render-analysis!
              history a (.getCanonicalPath
                          (store/path! test (:subdirectory opts) "linear.svg")))
            (catch Throwable e
              (warn e "could not render the linearizability analysis"))))
        ; Configurations and paths can be huge; a few explain the verdict.
        (cond-> (assoc a :time-limit-ms time-limit-ms)
          (:configs a)     (update :configs #(take 10 %))
          (:final-paths a) (update :final-paths #(take 10 %)))))))

(defn r [_ _] {:type :invoke, :f :read, :value nil})

(defn w
  "Writes of values in [0, n)."
  [n]
  (fn [_ _] {:type :invoke, :f :write, :value (rand-int n)}))

(defn cas
  "Compare-and-sets from and to values in [0, n)."
  [n]
  (fn [_ _] {:type :invoke, :f :cas, :value [(rand-int n) (rand-int n)]}))

(defn final-reads
  "One read of each key in [0, key-count), keys in order."
  [key-count]
  (independent/sequential-generator
    (range key-count)
    (fn [_] (gen/once {:type :invoke, :f :read, :value nil}))))

(defn register
  "Options:
    :threads-per-key    processes working one key at a time (default 3)
    :ops-per-key        operations on a key before moving to the next (200)
    :knossos-time-limit seconds Knossos may spend on one key (300); then
                        that key is :unknown
    :value-range        writes and cas draw values from [0, n) (5)

  Few values make cas succeed often. They also let an indeterminate
  write (:info) explain a read of an older value: after a power cut that
  times out every client, the ops in flight all end :info, and with five
  values one of them can hold the value that a lost write had
  overwritten, so that Knossos accepts the loss. The power runs draw
  from 20.

  :final-generator reads every key once, after the faults have healed: a
  key moves on after :ops-per-key operations, and a write lost at the end
  of its key's life would otherwise never be read again (jepsen/run's
  final reads do the same for its lost-write check)."
  [opts]
  (let [per-key (:threads-per-key opts 3)
        n       (:value-range opts 5)
        ; The highest key handed out. concurrent-generator may build a
        ; key's generator before it uses it; a final read of a key that
        ; saw no operation reads nil and is trivially linearizable.
        top     (atom -1)]
    {:client    (client/client)
     :checker   (independent/checker
                  (checker/compose
                    {:linear   (linearizable-checker
                                 (model/cas-register)
                                 (long (* 1000 (:knossos-time-limit opts 300))))
                     :timeline (timeline/html)}))
     :generator (independent/concurrent-generator
                  per-key
                  (range)
                  (fn [k]
                    (swap! top max k)
                    (->> (gen/mix [r (w n) (cas n)])
                         (gen/limit (:ops-per-key opts 200)))))
     ; A delay: the keys are known only once the main phase is over.
     :final-generator (delay (final-reads (inc @top)))}))

(def workloads
  {"register" register})
