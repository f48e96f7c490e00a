(ns stutter.linearizable-test
  "Knossos through stutter.linearizable: indeterminate reads dropped, the
  verdicts on small histories, and the time limit. Knossos only, no
  Jepsen: `jepsen/lein test`."
  (:require [clojure.test :refer [deftest is testing]]
            [knossos.model :as model]
            [stutter.linearizable :as l]))

(defn- ops
  "Ops from [process type f value] rows, indexed in order."
  [& rows]
  (vec (map-indexed (fn [i [p t f v]] {:index i, :process p, :type t, :f f, :value v}) rows)))

(deftest drop-indeterminate-reads-test
  (let [h (ops [0 :invoke :read nil]   ; -> :info: dropped with its invocation
               [1 :invoke :write 1]
               [0 :info :read nil]
               [1 :info :write 1]       ; an :info write may have happened: kept
               [2 :invoke :read nil]    ; never completes: dropped
               [3 :invoke :read nil]
               [3 :ok :read 1]
               [:nemesis :info :start-partition nil])]
    (is (= [1 3 5 6 7] (map :index (l/drop-indeterminate-reads h))))))

(deftest verdicts-test
  (testing "sequential write then read of it"
    (is (true? (:valid? (l/analysis (model/cas-register)
                                    (ops [0 :invoke :write 1] [0 :ok :write 1]
                                         [1 :invoke :read nil] [1 :ok :read 1])
                                    10000)))))
  (testing "a stale read: 1 read after 2 was acknowledged"
    (is (false? (:valid? (l/analysis (model/cas-register)
                                     (ops [0 :invoke :write 1] [0 :ok :write 1]
                                          [0 :invoke :write 2] [0 :ok :write 2]
                                          [1 :invoke :read nil] [1 :ok :read 1])
                                     10000)))))
  (testing "a timed-out read says nothing, whatever it carries"
    (is (true? (:valid? (l/analysis (model/cas-register)
                                    (ops [0 :invoke :write 1] [0 :ok :write 1]
                                         [1 :invoke :read nil] [1 :info :read 7])
                                    10000))))))

(defn- hard-history
  "Many writes that never completed (each may take effect at any later
  point), then reads that each see a different one of them: Knossos's
  configurations multiply with every open write."
  [n]
  (apply ops (concat (for [p (range n)] [p :invoke :write p])
                     (for [p (range n)] [p :info :write p])
                     (mapcat (fn [i] [[(+ n i) :invoke :read nil] [(+ n i) :ok :read (mod (* 7 i) n)]])
                             (range (* 4 n))))))

(deftest time-limit-test
  (let [t0 (System/nanoTime)
        a  (l/analysis (model/cas-register) (hard-history 40) 200)
        ms (/ (- (System/nanoTime) t0) 1e6)]
    (is (= :unknown (:valid? a)))
    (is (= :timeout (:cause a)))
    (is (< ms 5000) "the verdict comes at the limit, not when the search ends")))
