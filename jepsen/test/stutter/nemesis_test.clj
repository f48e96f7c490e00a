(ns stutter.nemesis-test
  "The --nemesis option and the power fault's choice of nodes. Plain
  clojure.test, no nodes: `jepsen/lein test`."
  (:require [clojure.test :refer [deftest is testing]]
            [jepsen.db :as jdb]
            [stutter.nemesis :as nemesis]))

(deftest parse-faults-test
  (is (= #{:partition :kill :pause} (nemesis/parse-faults "all")))
  (is (= #{:power} (nemesis/parse-faults "power")))
  (is (= #{:power :pause} (nemesis/parse-faults "pause, power")))
  (is (= #{} (nemesis/parse-faults "none")))
  (testing "power is never in all: it needs faultfs mounts"
    (is (not ((nemesis/parse-faults "all") :power))))
  (is (thrown? IllegalArgumentException (nemesis/parse-faults "powercut"))))

(deftest parse-power-variants-test
  (is (= [:one :minority :all] (nemesis/parse-power-variants "one,minority,all")))
  (is (= [:all] (nemesis/parse-power-variants "all")))
  (is (thrown? IllegalArgumentException (nemesis/parse-power-variants "half")))
  (is (thrown? IllegalArgumentException (nemesis/parse-power-variants ""))))

(defn- db-led-by
  "A db whose only primary is `leader`."
  [leader]
  (reify jdb/Primary
    (primaries [_ _] [leader])
    (setup-primary! [_ _ _])))

(deftest power-targets-test
  (let [test {:nodes ["n1" "n2" "n3" "n4" "n5"]}
        db   (db-led-by "n4")]
    (is (= ["n1" "n2" "n3" "n4" "n5"] (nemesis/power-targets db test :all)))
    (testing "a minority: (n-1)/2 distinct nodes, never a majority"
      (dotimes [_ 50]
        (let [t (nemesis/power-targets db test :minority)]
          (is (= 2 (count t)))
          (is (= 2 (count (set t))))
          (is (every? (set (:nodes test)) t)))))
    (testing "one node: the leader about half the time, else any node"
      (let [picks (repeatedly 400 #(nemesis/power-targets db test :one))]
        (is (every? #(= 1 (count %)) picks))
        (is (every? (set (:nodes test)) (map first picks)))
        ; P(leader) = 1/2 + 1/2 * 1/5 = 0.6; 400 draws: 240 expected, and
        ; below 180 or above 300 is beyond six standard deviations (9.8).
        (is (< 180 (count (filter #{["n4"]} picks)) 300))))
    (is (= 1 (count (nemesis/power-targets db (assoc test :nodes ["n1" "n2" "n3"]) :minority))))))
