(ns stutter.linearizable
  "Knossos's linearizability check for one key's history, bounded the way
  Jepsen tests bound it: a time limit, after which the search is stopped
  and the verdict is :unknown (never a guess), and no indeterminate reads.

  Why not jepsen.checker/linearizable: it has no time limit, and Knossos's
  own :time-limit returns :unknown but leaves the search running (it is
  not aborted), so one hopeless key keeps eating CPU and heap while the
  others wait. Here a search that runs out of time or memory is aborted.
  Knossos only, no Jepsen: the test's checker (stutter.workload) and the
  recheck of stored histories (stutter.recheck) both call analysis.

  A read that ended :info (timed out, connection broken) constrains
  nothing: it may have returned anything. It is dropped, with its
  invocation, before the search, as the campaigns' Porcupine checker does.
  Left in, each one is an operation Knossos must keep open to the end of the
  history, and the configurations to explore double with each."
  (:require [knossos [linear :as linear]
                     [memory :as memory]
                     [search :as search]]))

(defn drop-indeterminate-reads
  "The history without reads that did not complete :ok or :fail (their
  completion is :info, or there is none), invocations included. Ops of
  other processes (the nemesis) pass through."
  [history]
  (let [ops (vec history)
        ; Index in ops of each process's open invocation, and the
        ; invocations to drop.
        drop (loop [i 0, open {}, drop (transient #{})]
               (if (= i (count ops))
                 ; Never completed: indeterminate too.
                 (persistent! (reduce conj! drop (vals open)))
                 (let [op (nth ops i)
                       p  (:process op)]
                   (cond
                     (not= :read (:f op))
                     (recur (inc i) open drop)

                     (= :invoke (:type op))
                     (recur (inc i) (assoc open p i) drop)

                     (= :info (:type op))
                     (recur (inc i) (dissoc open p)
                            (cond-> (conj! drop i)
                              (contains? open p) (conj! (get open p))))

                     :else
                     (recur (inc i) (dissoc open p) drop)))))]
    (into [] (keep-indexed (fn [i op] (when-not (drop i) op))) ops)))

(defn analysis
  "Knossos's linear analysis of a history against model, stopped after
  time-limit-ms (verdict :unknown, :cause :timeout) or when the heap runs
  low (:unknown, :cause :out-of-memory). opts: :keep-indeterminate-reads?
  (to measure what dropping them saves)."
  ([model history time-limit-ms] (analysis model history time-limit-ms {}))
  ([model history time-limit-ms opts]
   (let [s   (linear/start-analysis model (cond-> history
                                            (not (:keep-indeterminate-reads? opts))
                                            drop-indeterminate-reads))
         low (memory/on-low-mem! #(search/abort! s :out-of-memory))]
     (try
       (let [r (search/results s time-limit-ms ::timeout)]
         (if (= ::timeout r)
           (do (search/abort! s :timeout)
               {:valid? :unknown, :cause :timeout, :analyzer :linear})
           (assoc r :analyzer :linear)))
       (finally (low))))))
