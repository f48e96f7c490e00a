(ns stutter.suite-test
  (:require [clojure.test :refer [deftest is testing]]
            [jepsen.generator :as gen]
            [jepsen.generator.test :as gen.test]
            [stutter [suite :as suite]
                     [workload :as workload]]))

(def control {:opts {:nemesis #{:power}} :expect false})
(def safe    {:opts {:nemesis #{:power}} :expect true})

(deftest a-control-passes-only-when-knossos-finds-a-key-non-linearizable
  (testing "caught on a key"
    (is (:pass? (suite/judge control {:valid? false, :linear {true 12, false 1}, :faults {:power 3}}))))
  (testing "invalid only through another checker (:stats: no cas succeeded)"
    (let [s (suite/judge control {:valid? false, :linear {true 13}, :faults {:power 3}})]
      (is (not (:pass? s)))
      (is (re-find #"Knossos found no key" (:why s)))))
  (testing "valid"
    (is (not (:pass? (suite/judge control {:valid? true, :linear {true 13}, :faults {:power 3}}))))))

(deftest a-safe-run-must-be-valid-and-carry-out-its-faults
  (is (:pass? (suite/judge safe {:valid? true, :linear {true 13}, :faults {:power 2}})))
  (is (not (:pass? (suite/judge safe {:valid? :unknown, :linear {true 12, :unknown 1}, :faults {:power 2}}))))
  (is (re-find #"never carried out: power"
               (:why (suite/judge safe {:valid? true, :linear {true 13}, :faults {}})))))

(deftest writes-and-cas-draw-from-the-value-range
  (let [ops (concat (repeatedly 500 #((workload/w 20) nil nil))
                    (repeatedly 500 #((workload/cas 20) nil nil)))
        vs  (mapcat #(let [v (:value %)] (if (vector? v) v [v])) ops)]
    (is (every? #(< -1 % 20) vs))
    ; 1,500 draws from 20 values: more than 5 distinct ones, all but surely.
    (is (< 5 (count (distinct vs))))))

(deftest final-reads-read-every-key-once
  (let [ops (gen.test/perfect (gen/clients (workload/final-reads 4)))]
    (is (= [[0 nil] [1 nil] [2 nil] [3 nil]] (sort-by first (map :value ops))))
    (is (every? #(= :read (:f %)) ops))))

(deftest the-final-reads-cover-every-key-the-main-phase-used
  (let [wl    (workload/register {:ops-per-key 2, :threads-per-key 1})
        main  (gen.test/perfect (gen/limit 9 (gen/clients (:generator wl))))
        used  (set (map (comp first :value) main))
        final (set (map (comp first :value)
                        (gen.test/perfect (gen/clients (:final-generator wl)))))]
    (is (= 9 (count main)))
    (is (<= 5 (count used)))
    (is (every? final used))))
