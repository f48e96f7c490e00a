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

(defn r   [_ _] {:type :invoke, :f :read,  :value nil})
(defn w   [_ _] {:type :invoke, :f :write, :value (rand-int 5)})
(defn cas [_ _] {:type :invoke, :f :cas,   :value [(rand-int 5) (rand-int 5)]})

(defn register
  "Options:
    :threads-per-key    processes working one key at a time (default 3)
    :ops-per-key        operations on a key before moving to the next (200)
    :knossos-time-limit seconds Knossos may spend on one key (300); then
                        that key is :unknown"
  [opts]
  (let [per-key (:threads-per-key opts 3)]
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
                    (->> (gen/mix [r w cas])
                         (gen/limit (:ops-per-key opts 200)))))}))

(def workloads
  {"register" register})
