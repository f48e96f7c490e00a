(ns stutter.recheck-test
  "Knossos beside Porcupine on a stored history (stutter.recheck): agreement
  when their verdicts match key by key, disagreement when they do not.
  Knossos only, no Jepsen: `jepsen/lein test`."
  (:require [clojure.java.io :as io]
            [clojure.test :refer [deftest is testing]]
            [stutter.recheck :as r]))

(def history
  "Two keys, as the campaigns write them: k1 linearizable, k2 a stale
  read (1 after 2 was acknowledged). A nemesis op between."
  ["{:type :invoke, :f :write, :value [\"k1\" 1], :process 0, :time 1, :index 0}"
   "{:type :ok, :f :write, :value [\"k1\" 1], :process 0, :time 2, :index 1}"
   "{:type :invoke, :f :write, :value [\"k2\" 1], :process 0, :time 3, :index 2}"
   "{:type :ok, :f :write, :value [\"k2\" 1], :process 0, :time 4, :index 3}"
   "{:type :info, :f :start, :value nil, :process :nemesis, :time 5, :index 4}"
   "{:type :invoke, :f :write, :value [\"k2\" 2], :process 0, :time 6, :index 5}"
   "{:type :ok, :f :write, :value [\"k2\" 2], :process 0, :time 7, :index 6}"
   "{:type :invoke, :f :read, :value [\"k2\" nil], :process 1, :time 8, :index 7}"
   "{:type :ok, :f :read, :value [\"k2\" 1], :process 1, :time 9, :index 8}"
   "{:type :invoke, :f :read, :value [\"k1\" nil], :process 1, :time 10, :index 9}"
   "{:type :ok, :f :read, :value [\"k1\" 1], :process 1, :time 11, :index 10}"])

(defn- results-dir
  "A campaign results folder with the history and, if given, verdict.json
  holding Porcupine's per-key verdicts."
  [porcupine]
  (let [d (.toFile (java.nio.file.Files/createTempDirectory
                     "recheck-test" (make-array java.nio.file.attribute.FileAttribute 0)))]
    (spit (io/file d "history.edn") (str (apply str (interpose "\n" history)) "\n"))
    (when porcupine
      (spit (io/file d "verdict.json")
            (str "{\"valid\": false, \"linearizable_keys\": {"
                 (apply str (interpose ", " (for [[k v] porcupine] (str "\"" k "\": \"" v "\""))))
                 "}}")))
    (.getPath d)))

(deftest by-key-test
  (let [ks (r/by-key (map read-string history))]
    (is (= ["k1" "k2"] (keys ks)))
    (is (= [1 1 2 2 nil 1] (map :value (get ks "k2"))) "values unwrapped, the nemesis left out")))

(deftest agreement-test
  (testing "Knossos true on k1, false on k2, as Porcupine says"
    (let [res (r/recheck-one (r/source (results-dir {"k1" "Ok", "k2" "Illegal"})) 10000)]
      (is (= [true false] (map :valid? (:keys res))))
      (is (true? (:agree? res)))))
  (testing "a key missing from Porcupine's verdicts counts as Ok (it had nothing to check), so Knossos's false on k2 disagrees"
    (is (false? (:agree? (r/recheck-one (r/source (results-dir {"k1" "Ok"})) 10000)))))
  (testing "the comparison has teeth: Porcupine calling k2 Ok is a disagreement"
    (is (false? (:agree? (r/recheck-one (r/source (results-dir {"k1" "Ok", "k2" "Ok"})) 10000)))))
  (testing "Porcupine's Unknown agrees with nothing"
    (is (false? (:agree? (r/recheck-one (r/source (results-dir {"k1" "Unknown", "k2" "Illegal"})) 10000)))))
  (testing "without verdict.json there is nothing to agree with"
    (is (nil? (:agree? (r/recheck-one (r/source (results-dir nil)) 10000))))))

(deftest first-ops-test
  (let [k2 (get (r/by-key (map read-string history)) "k2")]
    (is (= [1 1] (map :value (r/first-ops 1 k2))))
    (is (= [1 1 2 2] (map :value (r/first-ops 2 k2))))
    (is (= k2 (r/first-ops 99 k2)))))
